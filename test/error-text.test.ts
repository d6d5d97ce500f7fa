import net from 'node:net';
import { errorText } from '../src/error-text';

describe('errorText', () => {
  it("is an error's message", () => {
    expect(errorText(new Error('connect ECONNREFUSED 127.0.0.1:5432'))).toBe(
      'connect ECONNREFUSED 127.0.0.1:5432',
    );
  });

  it("is an AggregateError's inner messages when its own is empty, each once", () => {
    const error = new AggregateError(
      [
        new Error('connect ECONNREFUSED ::1:5432'),
        new Error('connect ECONNREFUSED 127.0.0.1:5432'),
      ],
      '',
    );
    expect(errorText(error)).toBe(
      'connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432',
    );
    expect(errorText(new AggregateError([new Error('a'), new Error('a')], ''))).toBe('a');
  });

  it('is followed by what its cause says, in parentheses, cause after cause', () => {
    const overdue = new Error('The sync of the WAL did not return within 10000 ms.');
    const unavailable = new Error('The store is unavailable.', { cause: overdue });
    expect(errorText(unavailable)).toBe(
      'The store is unavailable. (The sync of the WAL did not return within 10000 ms.)',
    );
    expect(errorText(new Error('The token store failed.', { cause: unavailable }))).toBe(
      'The token store failed. (The store is unavailable. (The sync of the WAL did not return within 10000 ms.))',
    );
    expect(errorText(new Error('a', { cause: 'not an error' }))).toBe('a');
  });

  it('leaves out a cause its message already quotes, and a cause met before', () => {
    const refused = new Error('unsupported startup parameter: statement_timeout');
    const explained = new Error(
      'The server refused the statement time-out (unsupported startup parameter: statement_timeout).',
      { cause: refused },
    );
    expect(errorText(explained)).toBe(explained.message);
    const first = new Error('first');
    const second = new Error('second', { cause: first });
    first.cause = second;
    expect(errorText(first)).toBe('first (second)');
  });

  it('is the code, else the name, of an error that says nothing else', () => {
    expect(errorText(Object.assign(new Error(''), { code: 'ECONNRESET' }))).toBe('ECONNRESET');
    expect(errorText(new TypeError(''))).toBe('TypeError');
  });

  it('is the text of anything thrown that is not an error', () => {
    expect(errorText('the store is gone')).toBe('the store is gone');
    expect(errorText(undefined)).toBe('undefined');
  });

  it("says what Node's connection to a host of two addresses, both refusing, failed with", async () => {
    // Two loopback addresses of one port that nothing listens on, tried in turn as Node does.
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as net.AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const error = await new Promise<Error>((resolve) => {
      const socket = net.connect({
        port,
        host: 'two',
        lookup: (_host, _options, callback) =>
          (callback as (error: null, addresses: { address: string; family: number }[]) => void)(
            null,
            [
              { address: '127.0.0.1', family: 4 },
              { address: '127.0.0.2', family: 4 },
            ],
          ),
      });
      socket.once('error', resolve);
    });

    expect(error.message).toBe('');
    expect(errorText(error)).toBe(
      `connect ECONNREFUSED 127.0.0.1:${port}; connect ECONNREFUSED 127.0.0.2:${port}`,
    );
  });
});
