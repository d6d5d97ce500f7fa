import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { flushUntilIdle } from '../src/logger';

/** The directories destinationToFile made, removed after each test. */
const directories: string[] = [];

afterEach(() => {
  for (const directory of directories.splice(0))
    fs.rmSync(directory, { recursive: true, force: true });
});

/** A pino destination as main.ts makes standard output, into a new file; the file's path. */
function destinationToFile() {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-log-'));
  directories.push(directory);
  const file = path.join(directory, 'out.log');
  const fd = fs.openSync(file, 'w');
  const stream = pino.destination({ dest: fd, sync: false, minLength: 8192 });
  return { stream, file };
}

const flushed = (stream: ReturnType<typeof destinationToFile>['stream']) =>
  new Promise<void>((resolve) => flushUntilIdle(stream, resolve));

describe('flushUntilIdle', () => {
  it('writes out lines that came while a flush of nothing was under way', async () => {
    const { stream, file } = destinationToFile();
    await new Promise((resolve) => stream.once('ready', resolve));
    // As the periodic flush does every 100 ms: with nothing held, a write of nothing goes out.
    stream.flush();
    stream.write('{"message":"stopping"}\n');
    stream.write('{"message":"stopped"}\n');

    await flushed(stream);

    expect(fs.readFileSync(file, 'utf8')).toBe('{"message":"stopping"}\n{"message":"stopped"}\n');
    stream.destroy();
  });

  it('writes out more than a batch held back, and ends on a stream with nothing held', async () => {
    const { stream, file } = destinationToFile();
    await new Promise((resolve) => stream.once('ready', resolve));
    const lines = Array.from({ length: 1000 }, (_, i) => `{"n":${i}}\n`).join('');
    stream.write(lines);

    await flushed(stream);
    expect(fs.readFileSync(file, 'utf8')).toBe(lines);
    await flushed(stream);
    expect(fs.readFileSync(file, 'utf8')).toBe(lines);
    stream.destroy();
  });
});
