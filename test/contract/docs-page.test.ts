import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { node, operationsOf } from '../../scripts/contract/openapi-walk';
import {
  PROJECT_ROOT,
  cleanupChildren,
  startServer,
  tempSqlitePath,
  type RunningServer,
} from '../support/server-process';
import { loadSpec } from './support/spec';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = path.join(PROJECT_ROOT, 'dist', 'contract', 'docs-page.png');
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

// As with PostgreSQL: outside CI a machine without Chromium skips this suite and says so; CI
// installs Chromium (.ci/run) and never skips it.
const runs = fs.existsSync(CHROMIUM) || process.env.CI === 'true';
if (!runs) {
  process.stderr.write(
    `\nThe /docs browser test is SKIPPED: ${CHROMIUM} is missing (apt-get install chromium).\n\n`,
  );
}

/** Every operation of the contract, with its element id in Swagger UI and its documented statuses. */
const operations = [...operationsOf(loadSpec()).values()].map(({ method, template, operation }) => {
  const [tag] = (operation['tags'] as string[] | undefined) ?? ['default'];
  return {
    name: `${method} ${template}`,
    elementId: `operations-${tag}-${String(operation['operationId'])}`,
    statuses: Object.keys(node(operation['responses'])),
  };
});

let server: RunningServer;
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];
const foreignRequests: string[] = [];
const failedResponses: string[] = [];

(runs ? describe : describe.skip)('GET /docs in headless Chromium', () => {
  beforeAll(async () => {
    server = await startServer({ sqlitePath: tempSqlitePath() });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: CHROMIUM_ARGS,
      timeout: 20_000,
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    page.on('response', (response) => {
      if (response.status() >= 400) failedResponses.push(`${response.status()} ${response.url()}`);
    });
    // The page must work with no internet: anything not from the server is refused and recorded.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(`${server.baseUrl}/`)) return route.continue();
      foreignRequests.push(url);
      return route.abort();
    });
    await page.goto(`${server.baseUrl}/docs`, { timeout: 20_000 });
    await page.waitForSelector('#operations-plants-createPlant', { timeout: 20_000 });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await cleanupChildren();
  });

  it('shows every operation of the contract with every documented response, errors included', async () => {
    const shown = await Promise.all(
      operations.map(async ({ name, elementId, statuses }) => {
        const codes = await page
          .locator(`#${elementId} tr.response`)
          .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-code')));
        return { name, codes: statuses.filter((status) => codes.includes(status)) };
      }),
    );

    expect(shown).toStrictEqual(
      operations.map(({ name, statuses }) => ({ name, codes: statuses })),
    );
  });

  it('shows the request example and the schemas', async () => {
    const createPlant = await page.locator('#operations-plants-createPlant').innerText();
    const models = await page.locator('section.models').innerText();

    expect(createPlant).toContain('"name": "Monstera deliciosa"');
    expect(createPlant).toContain('A plant with the id 42 already exists.');
    for (const schema of ['NewPlant', 'Plant', 'PlantFields', 'Error']) {
      expect(models).toContain(schema);
    }
  });

  it('shows the bearer scheme, and a lock on the secured operations only', async () => {
    await page.click('button.authorize');
    const dialog = await page.locator('.dialog-ux').innerText();
    await page.click('.dialog-ux button.close-modal');

    expect(dialog).toContain('bearerAuth');
    expect(dialog).toContain('(http, Bearer)');
    expect(await page.locator('#operations-plants-createPlant .authorization__btn').count()).toBe(
      1,
    );
    expect(await page.locator('#operations-plants-deletePlant .authorization__btn').count()).toBe(
      1,
    );
    expect(await page.locator('#operations-service-getHealth .authorization__btn').count()).toBe(0);
  });

  it('logs no console error, loads everything from the server itself, and is saved as a screenshot', async () => {
    fs.mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });

    expect(consoleErrors).toStrictEqual([]);
    expect(foreignRequests).toStrictEqual([]);
    expect(failedResponses).toStrictEqual([]);
    expect(fs.statSync(SCREENSHOT).size).toBeGreaterThan(10_000);
  });
});
