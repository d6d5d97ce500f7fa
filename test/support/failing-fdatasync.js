/**
 * Preloaded into a server process (NODE_OPTIONS=--require, which runs in its worker threads too)
 * to give it a disk that fails: while the file FAIL_FDATASYNC_WHILE names exists, every
 * fdatasync answers EIO, as the kernel does when it could not write a file's pages back; given
 * FAIL_FDATASYNC_OF, only those of files whose path ends with it (`-wal` for the WAL, `.sqlite`
 * for the database file). Or a disk that stops answering: while the file HANG_FDATASYNC_WHILE
 * names exists, an fdatasync of a file whose path ends with that file's content (any file when it
 * is empty) first opens the FIFO beside it (its name and `.fifo`) for reading, which holds the
 * thread the sync runs on (one of libuv's pool, or the checkpoint thread) in the kernel until a
 * writer opens it (answerHungDisk in server-process.ts), as a sync stuck on a disk holds it: Node
 * cannot interrupt that thread, and its exit waits for it. No disk here can be made to fail or
 * stall on cue, so this is the one call the tests replace; everything else in the process is real.
 */
'use strict';
const fs = require('node:fs');

const flag = process.env.FAIL_FDATASYNC_WHILE;
const suffix = process.env.FAIL_FDATASYNC_OF;
const hangFlag = process.env.HANG_FDATASYNC_WHILE;
const realFdatasync = fs.fdatasync;
const realFdatasyncSync = fs.fdatasyncSync;

function pathOf(fd) {
  return fs.readlinkSync(`/proc/self/fd/${fd}`);
}

function fails(fd) {
  if (flag === undefined || !fs.existsSync(flag)) return false;
  return suffix === undefined || pathOf(fd).endsWith(suffix);
}

function hangs(fd) {
  if (hangFlag === undefined) return false;
  let of;
  try {
    of = fs.readFileSync(hangFlag, 'utf8');
  } catch {
    return false; // no flag: the disk answers
  }
  return pathOf(fd).endsWith(of);
}

function ioError() {
  return Object.assign(new Error('EIO: i/o error, fdatasync'), {
    errno: -5,
    code: 'EIO',
    syscall: 'fdatasync',
  });
}

fs.fdatasync = function fdatasync(fd, callback) {
  if (fails(fd)) return process.nextTick(callback, ioError());
  if (!hangs(fd)) return realFdatasync(fd, callback);
  fs.open(`${hangFlag}.fifo`, 'r', (error, fifo) => {
    if (error !== null) return callback(error);
    fs.closeSync(fifo);
    realFdatasync(fd, callback);
  });
};

fs.fdatasyncSync = function fdatasyncSync(fd) {
  if (fails(fd)) throw ioError();
  if (hangs(fd)) fs.closeSync(fs.openSync(`${hangFlag}.fifo`, 'r'));
  return realFdatasyncSync(fd);
};
