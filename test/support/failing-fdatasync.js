/**
 * Preloaded into a server process (NODE_OPTIONS=--require, which runs in its worker threads too)
 * to give it a disk that fails: while the file FAIL_FDATASYNC_WHILE names exists, every
 * fdatasync answers EIO, as the kernel does when it could not write a file's pages back; given
 * FAIL_FDATASYNC_OF, only those of files whose path ends with it (`-wal` for the WAL, `.sqlite`
 * for the database file). No disk here can be made to fail on cue, so this is the one call the
 * tests replace; everything else in the process is real.
 */
'use strict';
const fs = require('node:fs');

const flag = process.env.FAIL_FDATASYNC_WHILE;
const suffix = process.env.FAIL_FDATASYNC_OF;
const realFdatasync = fs.fdatasync;
const realFdatasyncSync = fs.fdatasyncSync;

function fails(fd) {
  if (flag === undefined || !fs.existsSync(flag)) return false;
  return suffix === undefined || fs.readlinkSync(`/proc/self/fd/${fd}`).endsWith(suffix);
}

function ioError() {
  return Object.assign(new Error('EIO: i/o error, fdatasync'), {
    errno: -5,
    code: 'EIO',
    syscall: 'fdatasync',
  });
}

fs.fdatasync = function fdatasync(fd, callback) {
  if (!fails(fd)) return realFdatasync(fd, callback);
  process.nextTick(callback, ioError());
};

fs.fdatasyncSync = function fdatasyncSync(fd) {
  if (fails(fd)) throw ioError();
  return realFdatasyncSync(fd);
};
