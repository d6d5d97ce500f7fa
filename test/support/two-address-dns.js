/**
 * Preloaded into a process (NODE_OPTIONS=--require) to give the host name `two-addresses.test`
 * two addresses, 127.0.0.1 and 127.0.0.2, as a dual-stack or round-robin name has: Node then
 * tries each in turn, and a connection refused at both fails with an AggregateError whose
 * message is empty. Every other name resolves as usual.
 */
'use strict';
const dns = require('node:dns');

const HOST = 'two-addresses.test';
const ADDRESSES = [
  { address: '127.0.0.1', family: 4 },
  { address: '127.0.0.2', family: 4 },
];
const realLookup = dns.lookup;

dns.lookup = function lookup(hostname, options, callback) {
  if (hostname !== HOST) return realLookup.apply(this, arguments);
  const done = typeof options === 'function' ? options : callback;
  const all = typeof options === 'object' && options !== null && options.all === true;
  process.nextTick(() =>
    all ? done(null, ADDRESSES) : done(null, ADDRESSES[0].address, ADDRESSES[0].family),
  );
};
