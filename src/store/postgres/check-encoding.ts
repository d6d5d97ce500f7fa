import type pg from 'pg';

interface EncodingRow {
  database: string;
  server: string;
  client: string;
}

/**
 * Rejects unless the database's encoding is UTF8, the only one that holds every name a client may
 * send. In another, one name outside it fails with 22P05, and with it its whole batch of up to
 * 1,000 requests (500). SQL_ASCII is refused too: it stores bytes unchecked, so what another
 * client writes in its own encoding comes back altered (the driver reads only UTF-8), and text
 * functions and ordering count bytes. The client encoding is UTF8 on every connection
 * (node-postgres sends it in the start-up packet, which outranks `options` and role or database
 * defaults); checked all the same, since every name is read back as UTF-8.
 */
export async function checkEncoding(pool: pg.Pool): Promise<void> {
  const { rows } = await pool.query<EncodingRow>(
    `SELECT current_database() AS database, current_setting('server_encoding') AS server,
            current_setting('client_encoding') AS client`,
  );
  const { database, server, client } = rows[0] as EncodingRow;
  if (server !== 'UTF8') {
    const why =
      server === 'SQL_ASCII'
        ? 'which stores bytes unchecked'
        : 'which cannot hold every name a client may send';
    throw new Error(
      `The PostgreSQL database "${database}" has the encoding ${server}, ${why}; the plant store ` +
        "needs a UTF8 database. Create one with CREATE DATABASE plants ENCODING 'UTF8' TEMPLATE " +
        "template0 (adding LC_COLLATE and LC_CTYPE 'C', or a UTF-8 locale, if the server's " +
        'default locale is not UTF-8), move any data into it with pg_dump and pg_restore, and ' +
        'point DATABASE_URL at it.',
    );
  }
  if (client !== 'UTF8') {
    throw new Error(
      `The PostgreSQL connection's client_encoding is ${client}; the plant store needs UTF8, which node-postgres sets.`,
    );
  }
}
