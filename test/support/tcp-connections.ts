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

/** The socket in `table` whose own port is `localPort` and whose peer's is `remotePort`. */
function tcpSocket(
  table: readonly string[][],
  localPort: number,
  remotePort: number,
): TcpSocket | undefined {
  const fields = table.find(
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

/** The inodes of the sockets among process `pid`'s descriptors. */
function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const socket = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (socket !== null) inodes.add(socket[1]!);
    } catch {
      // Closed since the directory was read.
    }
  }
  return inodes;
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
  const server = tcpSocket(tcpTable(), serverPort, clientPort);
  return server !== undefined && socketInodes(pid).has(server.inode);
}

/**
 * Whether the server has read every byte written so far on `client`, its connection to the
 * server's `serverPort`, as `table` (/proc/net/tcp) and `held` (the server's socket inodes) show
 * it: none is left in the client's buffers, the server's kernel has acknowledged them all, and the
 * server has accepted the connection and left none unread.
 */
function serverHasRead(
  table: readonly string[][],
  held: ReadonlySet<string>,
  serverPort: number,
  client: net.Socket,
): boolean {
  const clientPort = client.localPort;
  if (clientPort === undefined || client.writableLength > 0) return false;
  const sent = tcpSocket(table, clientPort, serverPort);
  const received = tcpSocket(table, serverPort, clientPort);
  return (
    sent !== undefined &&
    sent.unacknowledged === 0 &&
    received !== undefined &&
    received.unread === 0 &&
    held.has(received.inode)
  );
}

/**
 * Resolves once process `pid` has read every byte written so far on each of `clients` (see
 * serverHasRead), checked from one reading of the kernel's tables at a time; rejects after
 * `timeoutMs`.
 */
export function untilServerHasRead(
  pid: number,
  serverPort: number,
  clients: readonly net.Socket[],
  timeoutMs = 5000,
): Promise<void> {
  return waitFor(
    `the server reading what ${clients.length} connection(s) sent`,
    () => {
      const table = tcpTable();
      const held = socketInodes(pid);
      return clients.every((client) => serverHasRead(table, held, serverPort, client));
    },
    timeoutMs,
  );
}
