import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/**
 * A named pipe (mkfifo): a true pipe, as a container's standard output is, where Node's
 * `stdio: 'pipe'` gives a child a Unix socket pair instead. Writes to it of more than PIPE_BUF
 * (4096 bytes on Linux) are not atomic.
 */
export interface Fifo {
  /**
   * The write end, opened O_RDWR so that the open does not wait for a reader: a child's standard
   * output. Close it with closeWriter once the child has exited, or reading never ends.
   */
  readonly writeFd: number;
  closeWriter(): void;
  /**
   * Starts reading, polling the pipe (opened O_NONBLOCK, an open file description of its own, so
   * the writers' are left as they are), at most `bytesPerTick` each `tickMs` on average (at full
   * speed when not given, or once `fullSpeed` is called); `ended` resolves with every byte read
   * once no writer holds the pipe any more.
   */
  startReading(throttle?: { bytesPerTick: number; tickMs: number }): {
    fullSpeed(): void;
    ended: Promise<Buffer>;
  };
  /** Closes whatever is still open. */
  close(): void;
}

/** Makes a FIFO at `dir`/`name` and opens both its ends. */
export function openFifo(dir: string, name = 'stdout.fifo'): Fifo {
  const fifoPath = path.join(dir, name);
  execFileSync('mkfifo', [fifoPath]);
  let writeFd: number | undefined = fs.openSync(fifoPath, fs.constants.O_RDWR);
  let readFd: number | undefined = fs.openSync(
    fifoPath,
    fs.constants.O_RDONLY | fs.constants.O_NONBLOCK,
  );
  const closeWriter = () => {
    if (writeFd !== undefined) fs.closeSync(writeFd);
    writeFd = undefined;
  };
  return {
    writeFd,
    closeWriter,
    startReading(throttle) {
      let quota = throttle === undefined ? Infinity : throttle.bytesPerTick;
      // Ticks of tickMs on average, at random: ticks at a fixed period would lock in step with
      // writers that retry at one (sonic-boom waits 100 ms after EAGAIN) and always let the same go.
      const nextTickAfter = (now: number) => now + (0.5 + Math.random()) * (throttle?.tickMs ?? 0);
      let nextTick = nextTickAfter(Date.now());
      const read = async (): Promise<Buffer> => {
        const chunks: Buffer[] = [];
        const buffer = Buffer.alloc(65536);
        for (;;) {
          if (throttle !== undefined && quota !== Infinity && Date.now() >= nextTick) {
            nextTick = nextTickAfter(Date.now());
            quota = throttle.bytesPerTick;
          }
          let bytes = 0;
          if (quota > 0) {
            try {
              bytes = fs.readSync(readFd!, buffer, 0, Math.min(buffer.length, quota), null);
              if (bytes === 0) return Buffer.concat(chunks);
            } catch (error) {
              if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
            }
          }
          if (bytes === 0) {
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          quota -= bytes;
          chunks.push(Buffer.from(buffer.subarray(0, bytes)));
        }
      };
      return {
        fullSpeed: () => (quota = Infinity),
        ended: read(),
      };
    },
    close() {
      closeWriter();
      if (readFd !== undefined) fs.closeSync(readFd);
      readFd = undefined;
    },
  };
}
