/**
 * `npm run bench:checkpoints`: what SQLite's WAL checkpoints cost per write, by table size and by
 * how many writes one checkpoint covers, on one connection pinned to one core: commits of 25
 * scattered-id inserts (as group commit makes them), then a PASSIVE checkpoint, in rounds. Prints
 * the CPU and wall time per write of the commits and of the checkpoints. It measures the copy and
 * its syncs themselves; where they run (the event loop or the store's checkpoint thread) is for
 * `npm run bench` to show.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { sqliteMigrations } from '../../src/store/sqlite/migrations';
import { SQLITE_PAGE_CACHE_KIB } from '../../src/store/sqlite/sqlite-plant-store';
import { createdIds, PLANT_NAME, PLANT_TAG, plantId } from './ids';
import { hasTaskset, pinSelf } from './proc';
import { removeSqliteFiles } from './stores';

const USAGE = `Usage: npm run bench:checkpoints -- [options]
  --rows LIST       plants stored before each run (default 0,1000000)
  --every LIST      writes one checkpoint covers (default 1000,8000,16000)
  --writes N        writes measured per run (default 40000)
  --data-dir DIR    where the SQLite files go, on a real disk (default data/bench/stores)`;

const COMMIT = 25;

const list = (value: string) => value.split(',').map(Number);

/**
 * A store of `rows` plants, built once and kept for later runs. It is built under another name and
 * renamed when whole, so a run stopped halfway never leaves a short store to be taken for a full one.
 */
function prefilled(dataDir: string, rows: number): string {
  const file = path.join(dataDir, `checkpoints-base-${rows}.sqlite`);
  if (fs.existsSync(file)) return file;
  const partial = `${file}.partial`;
  removeSqliteFiles(partial);
  const db = new Database(partial);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = OFF');
    for (const migration of sqliteMigrations) db.exec(migration);
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)');
    db.transaction(() => {
      for (let n = 0; n < rows; n++)
        insert.run(BigInt(plantId(n, 'scattered')), PLANT_NAME, PLANT_TAG);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  fs.renameSync(partial, file);
  return file;
}

function measure(dataDir: string, rows: number, every: number, writes: number) {
  const file = path.join(dataDir, 'checkpoints-run.sqlite');
  removeSqliteFiles(file);
  fs.copyFileSync(prefilled(dataDir, rows), file);
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma(`cache_size = -${SQLITE_PAGE_CACHE_KIB}`);
    db.pragma('wal_autocheckpoint = 0');
    const insert = db.prepare(
      'INSERT INTO plants (id, name, tag) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING',
    );
    const nextCreatedId = createdIds('scattered');
    const commit = db.transaction(() => {
      for (let i = 0; i < COMMIT; i++) insert.run(BigInt(nextCreatedId()), PLANT_NAME, PLANT_TAG);
    });
    const totals = { commitCpu: 0, commitWall: 0, checkpointCpu: 0, checkpointWall: 0, frames: 0 };
    const timed = (run: () => void): [number, number] => {
      const cpu = process.cpuUsage();
      const start = process.hrtime.bigint();
      run();
      const used = process.cpuUsage(cpu);
      return [(used.user + used.system) / 1000, Number(process.hrtime.bigint() - start) / 1e6];
    };
    for (let done = 0; done < writes;) {
      const [cpu, wall] = timed(() => {
        for (let w = 0; w < every; w += COMMIT) commit();
      });
      totals.commitCpu += cpu;
      totals.commitWall += wall;
      done += every;
      const [checkpointCpu, checkpointWall] = timed(() => {
        const [row] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
        totals.frames += row?.log ?? 0;
      });
      totals.checkpointCpu += checkpointCpu;
      totals.checkpointWall += checkpointWall;
    }
    const perWrite = (ms: number) => ((ms * 1000) / writes).toFixed(1);
    return {
      rows,
      every,
      commitCpu: perWrite(totals.commitCpu),
      commitWall: perWrite(totals.commitWall),
      checkpointCpu: perWrite(totals.checkpointCpu),
      checkpointWall: perWrite(totals.checkpointWall),
      framesPerWrite: (totals.frames / writes).toFixed(2),
    };
  } finally {
    db.close();
    removeSqliteFiles(file);
  }
}

function main(): void {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '0,1000000' },
      every: { type: 'string', default: '1000,8000,16000' },
      writes: { type: 'string', default: '40000' },
      'data-dir': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const dataDir = path.resolve(
    values['data-dir'] ?? path.join(__dirname, '..', '..', '..', 'data', 'bench', 'stores'),
  );
  fs.mkdirSync(dataDir, { recursive: true });
  if (hasTaskset()) pinSelf(1);
  console.log(
    '| rows | writes per checkpoint | commit CPU µs/write | commit wall µs/write | checkpoint CPU µs/write | checkpoint wall µs/write | WAL frames per write |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const rows of list(values.rows)) {
    for (const every of list(values.every)) {
      const r = measure(dataDir, rows, every, Math.max(every, Number(values.writes)));
      console.log(
        `| ${rows} | ${every} | ${r.commitCpu} | ${r.commitWall} | ${r.checkpointCpu} | ${r.checkpointWall} | ${r.framesPerWrite} |`,
      );
    }
  }
}

main();
