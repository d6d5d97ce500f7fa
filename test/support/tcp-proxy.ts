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

/** Starts forwarding a free loopback port to `targetPort` on 127.0.0.1. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let mode: 'forward' | 'blackhole' = 'forward';
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (mode === 'blackhole') return;
    const upstream = net.connect(targetPort, '127.0.0.1');
    track(upstream);
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject).listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
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
