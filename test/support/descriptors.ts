import fs from 'node:fs';

/** Descriptors this process holds on `target`, a file that exists (Linux: /proc/self/fd). */
export function descriptorsOf(target: string): number {
  const real = fs.realpathSync(target);
  return fs.readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`) === real;
    } catch {
      return false; // the directory's own descriptor, gone once listed
    }
  }).length;
}

/** The descriptors process `pid` holds now, by number (Linux: /proc/<pid>/fd). */
export function descriptorNumbers(pid: number): number[] {
  return fs.readdirSync(`/proc/${pid}/fd`).map(Number);
}
