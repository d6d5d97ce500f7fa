import type { Socket } from 'node:net';

/**
 * Reads `socket` at about `bytesPerTick` each `tickMs` (each chunk goes to `onChunk`), pausing it
 * in between, so that the server's writes to it move at that pace; until the returned stop.
 */
export function readThrottled(
  socket: Socket,
  bytesPerTick: number,
  tickMs: number,
  onChunk: (chunk: Buffer) => void,
): () => void {
  let quota = 0;
  socket.on('data', (chunk: Buffer) => {
    onChunk(chunk);
    quota -= chunk.length;
    if (quota <= 0) socket.pause();
  });
  const timer = setInterval(() => {
    quota = bytesPerTick;
    socket.resume();
  }, tickMs);
  return () => clearInterval(timer);
}
