import fs from 'node:fs';
import type net from 'node:net';
import { waitFor } from './log-lines';

/**
 * What the kernel says of the loopback TCP connections between a test and a server process it
 * started (Linux, IPv4: /proc/net/tcp), so that a test can wait for the server to have done
 * something with what it was sent instead of sleeping and hoping it has.
 */

/** One socket's line of /proc/net/tcp. */
interface TcpSocket {
  /** Bytes sent and not yet acknowledged by the peer's kernel. */
  readonly unacknowledged: number;
  /** Bytes received and not yet read by the socket's process. */
  readonly unread: number;
  /** The socket's inode, which names it among a process's descriptors (0 once no process holds it). */
  readonly inode: string;
}

const portOf = (address: string) => parseInt(address.split(':')[1] ?? '0', 16);

/** The fields of each line of /proc/net/tcp but its heading. */
function tcpTable(): string[][] {
  return fs
    .readFileSync('/proc/net/tcp', 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/));
}

/** The socket of this machine whose own port is `localPort` and whose peer's is `remotePort`. */
function tcpSocket(localPort: number, remotePort: number): TcpSocket | undefined {
  const fields = tcpTable().find(
    (candidate) =>
      portOf(candidate[1] ?? ':0') === localPort && portOf(candidate[2] ?? ':0') === remotePort,
  );
  if (fields === undefined) return undefined;
  const [unacknowledged, unread] = (fields[4] ?? '0:0').split(':').map((hex) => parseInt(hex, 16));
  return { unacknowledged: unacknowledged ?? 0, unread: unread ?? 0, inode: fields[9] ?? '0' };
}

/** Whether a socket of this machine listens on `port` (state 0A, TCP_LISTEN). */
export function listensOn(port: number): boolean {
  return tcpTable().some((fields) => portOf(fields[1] ?? ':0') === port && fields[3] === '0A');
}

/** Whether process `pid` has the socket among its descriptors. */
function holds(pid: number, socket: TcpSocket): boolean {
  if (socket.inode === '0') return false;
  return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
    try {
      return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${socket.inode}]`;
    } catch {
      return false;
    }
  });
}

/**
 * Whether process `pid` still holds the TCP connection from `clientPort` to its `serverPort`; a
 * connection the process has closed, even one the kernel still winds down, is not held.
 */
export function serverHoldsConnection(
  pid: number,
  serverPort: number,
  clientPort: number,
): boolean {
  const server = tcpSocket(serverPort, clientPort);
  return server !== undefined && holds(pid, server);
}

/**
 * Whether process `pid` has read every byte written so far on `client`, its connection to the
 * process's `serverPort`: none is left in the client's buffers, the server's kernel has
 * acknowledged them all, and the process has accepted the connection and left none unread.
 */
export function serverHasRead(pid: number, serverPort: number, client: net.Socket): boolean {
  const clientPort = client.localPort;
  if (clientPort === undefined || client.writableLength > 0) return false;
  const sent = tcpSocket(clientPort, serverPort);
  const received = tcpSocket(serverPort, clientPort);
  return (
    sent !== undefined &&
    sent.unacknowledged === 0 &&
    received !== undefined &&
    received.unread === 0 &&
    holds(pid, received)
  );
}

/**
 * Resolves once process `pid` has read every byte written so far on each of `clients` (see
 * serverHasRead); rejects after `timeoutMs`.
 */
export function untilServerHasRead(
  pid: number,
  serverPort: number,
  clients: readonly net.Socket[],
  timeoutMs = 5000,
): Promise<void> {
  return waitFor(
    `the server reading what ${clients.length} connection(s) sent`,
    () => clients.every((client) => serverHasRead(pid, serverPort, client)),
    timeoutMs,
  );
}
