/**
 * Preloaded into a server process (NODE_OPTIONS=--require) to give it a disk that fails: while
 * the file FAIL_FDATASYNC_WHILE names exists, every fdatasync answers EIO, as the kernel does when
 * it could not write a file's pages back. No disk here can be made to fail on cue, so this is the
 * one call the tests replace; everything else in the process is real.
 */
'use strict';
const fs = require('node:fs');

const flag = process.env.FAIL_FDATASYNC_WHILE;
const realFdatasync = fs.fdatasync;

fs.fdatasync = function fdatasync(fd, callback) {
  if (flag === undefined || !fs.existsSync(flag)) return realFdatasync(fd, callback);
  const error = Object.assign(new Error('EIO: i/o error, fdatasync'), {
    errno: -5,
    code: 'EIO',
    syscall: 'fdatasync',
  });
  process.nextTick(callback, error);
};
