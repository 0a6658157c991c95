// Browser test of rungd's web pages, driven by scripts/browser-test.sh (which starts Postgres, rungd,
// the workers and the two jobs). Uses the system chromium through playwright-core; never downloads a
// browser. Env: RUNG_URL, RUNG_UI_TOKEN (support), RUNG_ADMIN_TOKEN, JOB_RECOVERED, JOB_ESCALATED, ESCALATION_ID,
// OUT_DIR, CHROMIUM.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const env = (k) => { const v = process.env[k]; if (!v) { console.log(`not ok - ${k} is set`); process.exit(1); } return v; };
const base = env('RUNG_URL'), token = env('RUNG_UI_TOKEN'), adminToken = env('RUNG_ADMIN_TOKEN');
const jobR = env('JOB_RECOVERED'), jobE = env('JOB_ESCALATED'), escId = env('ESCALATION_ID');
const out = process.env.OUT_DIR || path.join(__dirname, 'out');
let failed = 0;
function check(cond, name, detail) {
  console.log(`${cond ? 'ok' : 'not ok'} - ${name}`);
  if (!cond) { failed++; if (detail !== undefined) console.log(`# ${String(detail).slice(0, 800)}`); }
}

(async () => {
  fs.mkdirSync(out, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'rung-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.setDefaultTimeout(10000);
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  try {
    // 1. Not logged in: the job page sends the browser to the login form, which brings it back.
    await page.goto(`${base}/ui/jobs/${jobR}`);
    check(new URL(page.url()).pathname === '/ui/login', 'without a cookie the job page redirects to the login form', page.url());
    await page.screenshot({ path: path.join(out, 'login.png') });
    await page.fill('input[name=token]', token);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    check(new URL(page.url()).pathname === `/ui/jobs/${jobR}`, 'login returns to the job page', page.url());
    const cookies = await ctx.cookies(base);
    const c = cookies.find((x) => x.name === 'rung_token');
    check(c && c.httpOnly && c.sameSite === 'Strict', 'the token cookie is HttpOnly and SameSite=Strict', JSON.stringify(c));

    // 2. The recovered job: final state, the two rungs in the timeline, the memory chart.
    const h1 = await page.textContent('h1');
    check(/succeeded/.test(h1), 'job page shows the final state succeeded', h1);
    check(h1.includes('<b>&two rungs</b>') && (await page.locator('h1 b').count()) === 0,
      'the job name is shown as text, not markup', h1);
    const attempts = page.locator('section.attempt');
    const n = await attempts.count();
    check(n === 3, 'the timeline shows three attempts', n);
    const rungs = await page.locator('section.attempt .rung code').allTextContents();
    check(rungs[0] === 'gradient_checkpointing' && rungs[1] === 'batch_size',
      'the timeline names the two rungs: gradient_checkpointing, then batch_size', JSON.stringify(rungs));
    const classes = await page.locator('section.attempt dt:text-is("class") + dd').allTextContents();
    check(classes.filter((x) => x.startsWith('oom_')).length === 2 && classes[2] === 'success',
      'two OOM attempts, then a success', JSON.stringify(classes));
    const charts = await page.locator('section.attempt svg.memchart').count();
    check(charts >= 1, 'an SVG memory chart is drawn for the attempts', charts);
    const diff = await page.locator('table.diff').first().textContent();
    check(/batch_size/.test(diff) && /gradient_checkpointing/.test(diff), 'target vs current config diff names both changes', diff);
    await page.screenshot({ path: path.join(out, 'job.png'), fullPage: true });

    // 3. The escalation: trigger, recommendation, the report's attempts table.
    await page.goto(`${base}/ui/escalations/${escId}`);
    const trig = await page.textContent('code.trigger');
    check(trig === 'gpu_quarantined', 'escalation page shows the trigger', trig);
    const rec = await page.textContent('.recommendation');
    check(/inspect the GPU/.test(rec), 'escalation page shows the recommendation', rec);
    const heads = await page.locator('article.report table thead th').allTextContents();
    check(heads.includes('worker') && heads.includes('class') && heads.includes('rung'), 'the report renders its attempts table', JSON.stringify(heads));
    const cells = await page.locator('article.report table tbody td').allTextContents();
    check(cells.includes('env_fault'), 'the attempts table names the env_fault class', JSON.stringify(cells.slice(0, 20)));
    check((await page.locator('article.report pre code').count()) >= 1, 'the report shows the log lines as code');
    await page.screenshot({ path: path.join(out, 'escalation.png'), fullPage: true });

    // 4. Lists: the queue with both jobs, escalations, GPUs with the quarantined one.
    await page.goto(`${base}/ui/`);
    const links = await page.locator('table.jobs a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    check(links.includes(`/ui/jobs/${jobR}`) && links.includes(`/ui/jobs/${jobE}`), 'the queue links both jobs', JSON.stringify(links));
    await page.screenshot({ path: path.join(out, 'queue.png'), fullPage: true });
    await page.goto(`${base}/ui/?state=failed`);
    check((await page.locator('table.jobs tbody tr').count()) === 0, 'the state filter shows no failed jobs');
    await page.goto(`${base}/ui/escalations?state=open`);
    check((await page.locator(`a[href="/ui/escalations/${escId}"]`).count()) >= 1, 'the open escalations list links the escalation');
    await page.screenshot({ path: path.join(out, 'escalations.png'), fullPage: true });
    await page.goto(`${base}/ui/gpus`);
    const gpuText = await page.textContent('table.gpus');
    check(/quarantined/.test(gpuText) && /GPU-browser-dirty/.test(gpuText), 'the GPUs page shows the dirty GPU quarantined', gpuText);
    await page.screenshot({ path: path.join(out, 'gpus.png'), fullPage: true });

    // 5. The forms: the quarantined GPU offers a release; support acknowledges the escalation from its
    // page and drains, then resumes, a worker from the GPUs page (server/web_act.c).
    check((await page.locator('table.gpus form.release button').count()) >= 1, 'the quarantined GPU offers a release button');
    await page.goto(`${base}/ui/escalations/${escId}`);
    await page.fill('form.ack input[name=note]', 'looking at the dirty GPU');
    await Promise.all([page.waitForNavigation(), page.click('form.ack button')]);
    check(new URL(page.url()).pathname === `/ui/escalations/${escId}`, 'acknowledging returns to the escalation page', page.url());
    const acked = await page.textContent('h1');
    check(/acknowledged/.test(acked), 'the escalation is acknowledged', acked);
    check((await page.textContent('dl.escalation')).includes('looking at the dirty GPU'), 'with the note');
    check((await page.locator('form.ack').count()) === 0 && (await page.locator('form.resolve').count()) === 1,
      'now only resolve is offered');
    await page.goto(`${base}/ui/gpus`);
    await page.locator('table.workers form.drain input[name=note]').first().fill('kernel update');
    await Promise.all([page.waitForNavigation(), page.locator('table.workers form.drain button').first().click()]);
    const drained = await page.textContent('table.workers');
    check(new URL(page.url()).pathname === '/ui/gpus' && /draining/.test(drained) && /kernel update/.test(drained),
      'a worker drained from the GPUs page, with who and why', drained);
    await page.screenshot({ path: path.join(out, 'workers.png'), fullPage: true });
    await Promise.all([page.waitForNavigation(), page.locator('table.workers form.resume button').first().click()]);
    check((await page.locator('table.workers form.resume').count()) === 0, 'and resumed');

    // 6. The plan page (server/web_plan.c): the navigation leads to it; a config pasted as JSON is
    // planned for the fleet's 24 GiB GPU, and the form keeps the text as typed.
    await page.goto(`${base}/ui/`);
    await Promise.all([page.waitForNavigation(), page.click('header a[href="/ui/plan"]')]);
    check(new URL(page.url()).pathname === '/ui/plan' && (await page.locator('form.plan textarea[name=config]').count()) === 1,
      'the navigation leads to the plan page and its form', page.url());
    const planned = JSON.stringify({ job: 'extension', config: { name: 'plan <b>me</b>', process: [{ type: 'diffusion_trainer',
      training_folder: 'output', device: 'cuda:0', network: { type: 'lora', linear: 16, linear_alpha: 16 },
      save: { dtype: 'float16', save_every: 250 },
      train: { batch_size: 4, gradient_accumulation: 1, gradient_checkpointing: true, steps: 20, lr: 1e-4,
        optimizer: 'adamw8bit', disable_sampling: false, dtype: 'bf16' },
      datasets: [{ folder_path: '/data/example', caption_ext: 'txt', resolution: [1024] }],
      sample: { sample_every: 250, width: 1024, height: 1024, sample_steps: 20, prompts: ['a photo of a cat'] },
      model: { name_or_path: 'black-forest-labs/FLUX.1-dev', arch: 'flux', quantize: true, low_vram: false } }] },
      meta: { name: '[name]' } }, null, 2);
    await page.fill('form.plan textarea[name=config]', planned);
    await Promise.all([page.waitForNavigation(), page.click('form.plan button')]);
    const planRows = await page.locator('table.plan tbody tr td:first-child').allTextContents();
    check(planRows.includes('24576') && (await page.locator('h2 code.arch').textContent()) === 'flux',
      'the plan has a row for the fleet\'s 24 GiB GPU, for arch flux', JSON.stringify(planRows));
    check((await page.inputValue('form.plan textarea[name=config]')) === planned, 'the plan page keeps the config as typed');
    await page.screenshot({ path: path.join(out, 'plan.png'), fullPage: true });

    // 7. Logging out drops the cookie: the next page asks for the token again.
    await Promise.all([page.waitForNavigation(), page.click('header button')]);
    await page.goto(`${base}/ui/gpus`);
    check(new URL(page.url()).pathname === '/ui/login', 'after logging out the pages ask for the token again', page.url());

    // 8. An admin's tokens page (server/web_tokens.c): Tokens in the navigation, a token created with its
    // secret shown once, a limit set on its row, then revoked; the GPUs page lists the owners.
    await page.fill('input[name=token]', adminToken);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await Promise.all([page.waitForNavigation(), page.click('header a[href="/ui/tokens"]')]);
    check(new URL(page.url()).pathname === '/ui/tokens' && (await page.locator('form.create').count()) === 1,
      'an admin\'s navigation leads to the tokens page and its create form', page.url());
    await page.selectOption('form.create select[name=role]', 'submitter');
    await page.fill('form.create input[name=name]', 'browser-team');
    await Promise.all([page.waitForNavigation(), page.click('form.create button')]);
    const secret = (await page.textContent('code.secret')) || '';
    check(/^rung_[0-9a-f]{64}$/.test(secret.trim()), 'the new token\'s secret is shown once', secret);
    await page.goto(`${base}/ui/tokens`);
    const row = page.locator('table.tokens tr', { hasText: 'browser-team' });
    await row.locator('form.limits input[name=max_running]').fill('2');
    await Promise.all([page.waitForNavigation(), row.locator('form.limits button').click()]);
    check((await page.locator('table.tokens tr', { hasText: 'browser-team' }).locator('td.limit').textContent()) === '2',
      'a limit of 2 set on its row');
    await Promise.all([page.waitForNavigation(), page.locator('table.tokens tr', { hasText: 'browser-team' })
      .locator('form.revoke button').click()]);
    check((await page.locator('table.tokens tr.revoked', { hasText: 'browser-team' }).count()) === 1,
      'and revoked: its row says so and offers no forms');
    await page.screenshot({ path: path.join(out, 'tokens.png'), fullPage: true });
    await page.goto(`${base}/ui/gpus`);
    check((await page.locator('table.owners').count()) === 1 || /No owner runs or waits/.test(await page.textContent('main')),
      'the GPUs page has its owners section');
    check(errors.length === 0, 'no console errors (CSP, markup)', errors.join(' | '));
  } catch (e) {
    check(false, 'the browser session ran to the end', e && e.stack);
    await page.screenshot({ path: path.join(out, 'failure.png'), fullPage: true }).catch(() => {});
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
})();
