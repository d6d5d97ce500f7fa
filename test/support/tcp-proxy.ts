import net from 'node:net';

/** A loopback TCP proxy a test can cut, to fail the network between the service and its database. */
export interface TcpProxy {
  readonly port: number;
  /** Closes every connection and the port itself: new connections are refused at once. */
  cut(): Promise<void>;
  /** Closes every connection; new ones are accepted but never answered, like an unreachable host. */
  blackhole(): void;
  /** Forwards again, on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A server that forwards each connection to `targetPort` on 127.0.0.1 (or, while `forwarding()` is
 * false, holds it unanswered), and a way to close every connection it has made.
 */
export function forwardingServer(targetPort: number, forwarding: () => boolean = () => true) {
  const sockets = new Set<net.Socket>();
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (!forwarding()) return;
    const upstream = net.connect(targetPort, '127.0.0.1');
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  return { server, dropAll };
}

/** Starts forwarding a free loopback port to `targetPort` on 127.0.0.1. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let mode: 'forward' | 'blackhole' = 'forward';
  const { server, dropAll } = forwardingServer(targetPort, () => mode === 'forward');
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject).listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const stop = () =>
    new Promise<void>((resolve) => {
      dropAll();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  return {
    port,
    cut: stop,
    blackhole() {
      mode = 'blackhole';
      dropAll();
    },
    async restore() {
      mode = 'forward';
      if (!server.listening) await listen(port);
    },
    close: stop,
  };
}
