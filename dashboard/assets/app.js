// The fusebox dashboard: keeps the breakers streamed by api/events (a full
// "snapshot", then "delta" messages holding only what changed) and renders
// the cards that are on screen, open and probing breakers first.
//
// Breaker names and every other value from the server are data: they reach
// the page through textContent and element properties only, never as markup.
'use strict';

(function () {
  const tokenMeta = document.querySelector('meta[name="fusebox-token"]');
  const token = tokenMeta ? tokenMeta.content : '';
  const grid = document.getElementById('breakers');
  const spacer = document.getElementById('spacer');
  const empty = document.getElementById('empty');
  const conn = document.getElementById('conn');
  const connText = document.getElementById('conn-text');
  const search = document.getElementById('search');
  const stateFilter = document.getElementById('state-filter');
  const summary = document.getElementById('summary');
  const shownEl = document.getElementById('shown');

  const STATES = ['closed', 'open', 'half_open', 'probing'];
  const OUTCOMES = ['', 'success', 'failure', 'ignore'];
  const RANK = { open: 0, probing: 1, half_open: 2, closed: 3 };
  const CARD_H = 316; // px, every card the same height: the list renders only what is on screen
  const GAP = 14;
  const MIN_W = 360;
  const WINDOW = 10 * 60 * 1000; // every timeline spans the last 10 minutes

  const COUNTERS = [
    ['calls', 'calls', 'Calls that asked for a permit and finished, declined ones included'],
    ['failures', 'failure', 'Calls released as a failure'],
    ['declined', 'declined', 'Calls declined while open or probing'],
    ['successes', 'success', 'Calls released as a success'],
    ['ignored', 'ignored', 'Calls released as ignored (for example canceled)'],
    ['stale', 'stale', 'Releases of permits granted before the breaker last changed state'],
    ['dropped_events', 'dropped', 'Events of this breaker that a subscriber of the manager lost to a full buffer'],
    ['missed_transitions', 'missed', 'Transitions this page did not see because its event buffer was full'],
    ['would_decline', 'would decline', 'Calls a breaker in a dry run let through that it would have declined'],
  ];

  const byId = new Map(); // id -> breaker
  let actions = false;
  let halted = false;
  let history = 20;
  let offset = 0; // server clock minus ours, in ms
  let live = false;
  let lastNow = 0;
  let order = []; // the breakers shown, in order
  let updates = 0;
  const pool = []; // cards, reused as the list scrolls

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function stateLabel(s) { return s === 'half_open' ? 'half open' : s; }
  function span(ms) {
    if (ms < 0) ms = 0;
    if (ms < 1000) return Math.round(ms) + 'ms';
    const s = Math.floor(ms / 1000);
    if (s < 60) return s + 's';
    const pad = (n) => String(n).padStart(2, '0');
    if (s < 3600) return Math.floor(s / 60) + 'm ' + pad(s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + pad(Math.floor(s / 60) % 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + (Math.floor(s / 3600) % 24) + 'h';
  }
  function serverNow() { return live ? Date.now() + offset : lastNow; }

  // apply takes one record of the stream: [id, state, since, until, flags,
  // calls, successes, failures, ignored, declined, stale, dropped, missed,
  // slow, calls per 100 s, failures per thousand, processes in the fleet's
  // count, calls a dry run would have declined, why it opened,
  // [new transitions], share admitted, end of the slow start], times in ms
  // from the message's now.
  function apply(r, now) {
    const b = byId.get(r[0]);
    if (!b) return false;
    const moved = b.state !== STATES[r[1]];
    b.v = (b.v || 0) + 1;
    b.state = STATES[r[1]];
    b.since = now + r[2];
    b.until = r[3] === null ? 0 : now + r[3];
    b.forced = (r[4] & 1) !== 0;
    b.storeDown = (r[4] & 4) !== 0;
    b.dryRun = (r[4] & 8) !== 0;
    b.calls = r[5]; b.successes = r[6]; b.failures = r[7]; b.ignored = r[8];
    b.declined = r[9]; b.stale = r[10]; b.dropped_events = r[11]; b.missed_transitions = r[12];
    b.slow = r[13]; b.callRate = r[14] / 100; b.failureRate = r[15] / 1000;
    b.processes = r[16];
    b.would_decline = r[17];
    b.why = r[18];
    for (const t of r[19]) {
      b.transitions.push({ from: STATES[t[0]], to: STATES[t[1]], at: now + t[2], cause: t[3], outcome: OUTCOMES[t[4]] || '', err: t[5] || '' });
    }
    if (b.transitions.length > history) b.transitions.splice(0, b.transitions.length - history);
    b.admitted = r[20] || 0;
    b.slowStartUntil = r[21] === null || r[21] === undefined ? 0 : now + r[21];
    return moved;
  }

  function take(msg, full) {
    if (full) {
      byId.clear();
      actions = msg.actions;
      history = msg.history || history;
      if (msg.title) document.getElementById('title').textContent = msg.title;
      if (msg.process) document.getElementById('process').textContent = msg.process;
    }
    offset = msg.now - Date.now();
    lastNow = msg.now;
    halted = msg.halted;
    // The order and the summary change only when a breaker comes, goes or
    // changes state; otherwise only the cards on screen are redrawn.
    let reorder = full || msg.names.length > 0 || msg.gone.length > 0;
    for (const [id, name] of msg.names) {
      if (!byId.has(id)) byId.set(id, { id: id, name: name, lower: name.toLowerCase(), transitions: [] });
    }
    for (const id of msg.gone) byId.delete(id);
    for (const r of msg.b) if (apply(r, msg.now)) reorder = true;
    seq = msg.seq;
    if (reorder) refilter();
    else schedule();
  }
  let seq = -1;

  // refilter recomputes which breakers are shown, and in what order.
  function refilter() {
    const t0 = performance.now();
    const q = search.value.trim().toLowerCase();
    const want = stateFilter.value;
    const out = [];
    const counts = { closed: 0, open: 0, half_open: 0, probing: 0 };
    let storeDown = 0;
    for (const b of byId.values()) {
      if (!b.state) continue;
      counts[b.state]++;
      if (b.storeDown) storeDown++;
      if (q && !b.lower.includes(q)) continue;
      if (want === 'not_closed' ? b.state === 'closed' : (want !== 'all' && b.state !== want)) continue;
      out.push(b);
    }
    out.sort((a, b) => (RANK[a.state] - RANK[b.state]) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    order = out;
    renderSummary(counts, storeDown);
    schedule();
    document.body.dataset.filterMs = String(performance.now() - t0);
  }

  function renderSummary(counts, storeDown) {
    const items = [];
    for (const s of ['open', 'probing', 'half_open', 'closed']) {
      const item = el('span', 'sum pill ' + s);
      item.dataset.state = s;
      item.title = 'show only ' + stateLabel(s) + ' breakers';
      item.append(el('b', 'n', String(counts[s])), document.createTextNode(' ' + stateLabel(s)));
      item.addEventListener('click', () => { stateFilter.value = stateFilter.value === s ? 'all' : s; refilter(); });
      items.push(item);
    }
    if (storeDown > 0) items.push(el('span', 'sum alert', storeDown + ' store link(s) down'));
    if (halted) items.push(el('span', 'sum alert halted', 'manager halted: every call is refused'));
    summary.replaceChildren(...items);
    shownEl.textContent = order.length === byId.size ? byId.size + ' breakers' : order.length + ' of ' + byId.size + ' breakers';
    empty.hidden = byId.size > 0;
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  }

  // render draws the cards of the rows on screen, and no others.
  function render() {
    const width = grid.clientWidth;
    const cols = Math.max(1, Math.floor((width + GAP) / (MIN_W + GAP)));
    const cardW = (width - GAP * (cols - 1)) / cols;
    const rows = Math.ceil(order.length / cols);
    spacer.style.height = (rows * (CARD_H + GAP)) + 'px';
    const top = grid.getBoundingClientRect().top + window.scrollY;
    const from = Math.max(0, Math.floor((window.scrollY - top) / (CARD_H + GAP)) - 1);
    const to = Math.min(rows, Math.ceil((window.scrollY - top + window.innerHeight) / (CARD_H + GAP)) + 1);
    const now = serverNow();
    let used = 0;
    for (let row = from; row < to; row++) {
      for (let col = 0; col < cols; col++) {
        const b = order[row * cols + col];
        if (!b) break;
        let c = pool[used];
        if (!c) { c = newCard(); pool.push(c); grid.append(c.root); }
        used++;
        c.root.hidden = false;
        c.root.style.transform = 'translate(' + (col * (cardW + GAP)) + 'px,' + (row * (CARD_H + GAP)) + 'px)';
        c.root.style.width = cardW + 'px';
        // A card is redrawn when its breaker changed, and once a second
        // for its ages.
        const sec = Math.floor(now / 1000);
        if (c.b !== b || c.v !== b.v || c.sec !== sec || c.actionsShown !== actions) {
          c.b = b; c.v = b.v; c.sec = sec; c.actionsShown = actions;
          renderCard(c, b, now);
        }
      }
    }
    for (let i = used; i < pool.length; i++) pool[i].root.hidden = true;
    updates++;
    document.body.dataset.updates = String(updates);
    document.body.dataset.rendered = String(used);
  }

  function newCard() {
    const c = {};
    c.root = el('section', 'card');
    const head = el('div', 'card-head');
    c.nameEl = el('h2', 'name');
    c.pill = el('span', 'pill state');
    c.forced = el('span', 'pill forced', 'forced');
    c.dry = el('span', 'pill dry', 'dry run');
    c.dry.title = 'Declines no call: what it would have declined is let through and counted';
    head.append(c.nameEl, c.pill, c.dry, c.forced);
    c.since = el('p', 'since');
    c.why = el('p', 'why');
    c.rates = el('p', 'rates');
    const dl = el('dl', 'counters');
    c.counters = {};
    for (const [key, label, help] of COUNTERS.slice(0, 4)) {
      const box = el('div', 'counter ' + label);
      box.title = help;
      const dd = el('dd', '', '0');
      dd.dataset.counter = key;
      box.append(el('dt', '', label), dd);
      dl.append(box);
      c.counters[key] = dd;
    }
    c.more = el('p', 'more');
    c.bar = el('div', 'bar');
    c.bar.setAttribute('role', 'img');
    const axis = el('div', 'axis');
    axis.append(el('span', '', span(WINDOW) + ' ago'), el('span', '', 'now'));
    c.log = el('ol', 'log');
    c.root.append(head, c.since, c.why, c.rates, dl, c.more, c.bar, axis, c.log);
    return c;
  }

  // addActions adds the force-open and reset buttons, which exist only when
  // the server serves the actions.
  function addActions(c) {
    c.actions = el('div', 'actions');
    c.forceBtn = el('button', 'force', 'Force open');
    c.forceBtn.type = 'button';
    c.resetBtn = el('button', 'reset', 'Reset');
    c.resetBtn.type = 'button';
    c.error = el('p', 'error');
    c.forceBtn.addEventListener('click', () => act(c, 'force-open'));
    c.resetBtn.addEventListener('click', () => act(c, 'reset'));
    c.actions.append(c.forceBtn, c.resetBtn, c.error);
    c.root.append(c.actions);
  }

  function act(c, what) {
    if (!c.error) return;
    c.error.textContent = '';
    const body = new URLSearchParams();
    body.set('breaker', c.name);
    fetch('api/' + what, {
      method: 'POST', headers: { 'X-Fusebox-Token': token }, body: body, credentials: 'same-origin',
    }).then((r) => {
      if (!r.ok) return r.text().then((t) => { c.error.textContent = what + ' failed: ' + t.trim(); });
    }).catch((err) => { c.error.textContent = what + ' failed: ' + err; });
  }

  function renderCard(c, b, now) {
    if (c.name !== b.name) {
      c.name = b.name;
      if (c.error) c.error.textContent = '';
    }
    c.root.className = 'card ' + b.state;
    c.root.dataset.state = b.state;
    c.nameEl.textContent = b.name;
    c.nameEl.title = b.name;
    c.pill.className = 'pill state ' + b.state;
    c.pill.textContent = stateLabel(b.state);
    c.forced.hidden = !b.forced;
    c.dry.hidden = !b.dryRun;
    // Why it opened: the error of the call that opened it, and who, in a
    // fleet; the whole text in the tooltip, the card cuts it to a line.
    c.why.textContent = b.why || '';
    c.why.title = b.why || '';
    c.why.hidden = !b.why;
    let since = stateLabel(b.state) + ' for ' + span(now - b.since);
    if (b.forced) since += ' \u00b7 forced open until reset';
    else if (b.until && b.state === 'open') since += ' \u00b7 probe allowed in ' + span(b.until - now);
    else if (b.until && b.state === 'probing') since += ' \u00b7 probe times out in ' + span(b.until - now);
    if (b.slowStartUntil && b.state === 'closed') {
      since += ' \u00b7 slow start, ' + Math.round(b.admitted * 100) + ' % admitted, full at ' +
        new Date(b.slowStartUntil).toLocaleTimeString([], { hour12: false });
    }
    if (b.storeDown) since += ' \u00b7 store down';
    if (b.processes > 0) since += ' \u00b7 fleet count from ' + b.processes + (b.processes === 1 ? ' process' : ' processes');
    c.since.textContent = since;
    c.rates.textContent = b.callRate.toFixed(b.callRate < 10 ? 1 : 0) + ' calls/s \u00b7 ' +
      (b.failureRate * 100).toFixed(1) + ' % failures (last minute)';
    for (const [key] of COUNTERS.slice(0, 4)) {
      c.counters[key].textContent = String(b[key]);
      c.counters[key].classList.toggle('zero', b[key] === 0);
    }
    const extra = [];
    for (const [key, label] of COUNTERS.slice(4)) if (b[key] > 0) extra.push(b[key] + ' ' + label);
    if (b.slow > 0) extra.push(b.slow + ' slow');
    c.more.textContent = extra.join(' \u00b7 ');
    renderTimeline(c, b, now);
    if (actions && !c.actions) addActions(c);
    if (c.actions) {
      c.actions.hidden = !actions;
      c.forceBtn.disabled = b.forced;
    }
  }

  // renderTimeline draws the last WINDOW on the same scale for every card.
  function renderTimeline(c, b, now) {
    const start = now - WINDOW;
    const recs = b.transitions;
    const segs = [];
    // Before the oldest transition kept, the breaker was in its from
    // state, if that transition is in the window; else unknown.
    let state = recs.length > 0 ? recs[0].from : b.state;
    let from = start;
    if (recs.length > 0 && recs[0].at > start && recs.length >= history) state = 'unknown';
    for (const r of recs) {
      if (r.at > start) { segs.push([state, from, r.at]); from = r.at; }
      state = r.to;
    }
    segs.push([b.state, from, now]);
    const bar = [];
    for (const [st, a, z] of segs) {
      if (z <= a) continue;
      const s = el('div', 'seg ' + st);
      s.style.flexGrow = String((z - a) / WINDOW);
      s.title = stateLabel(st) + ' for ' + span(z - a);
      bar.push(s);
    }
    c.bar.replaceChildren(...bar);
    c.bar.setAttribute('aria-label', 'timeline of the last ' + span(WINDOW));
    const items = [];
    for (let i = recs.length - 1; i >= 0 && items.length < 3; i--) {
      const r = recs[i];
      const li = el('li');
      li.append(el('span', 'when', span(now - r.at) + ' ago'), el('span', 'st ' + r.from, stateLabel(r.from)),
        el('span', 'arrow', '\u2192'), el('span', 'st ' + r.to, stateLabel(r.to)),
        el('span', 'cause', r.cause.replace('_', ' ') + (r.outcome ? ' \u00b7 ' + r.outcome : '')));
      if (r.err) li.title = r.err;
      items.push(li);
    }
    if (items.length === 0) items.push(el('li', 'none', 'no transitions since the dashboard started'));
    c.log.replaceChildren(...items);
  }

  function setConn(isLive, text) {
    live = isLive;
    conn.className = 'conn ' + (isLive ? 'live' : 'down');
    connText.textContent = text;
    // While disconnected the values are as of the last message: dimmed,
    // and the ages stop running.
    document.body.classList.toggle('stale', !isLive);
  }

  search.addEventListener('input', refilter);
  stateFilter.addEventListener('change', refilter);
  window.addEventListener('scroll', schedule, { passive: true });
  window.addEventListener('resize', schedule);
  setInterval(() => { if (live) schedule(); }, 1000);

  let es = null;
  function connect() {
    es = new EventSource('api/events');
    es.addEventListener('snapshot', (e) => { setConn(true, 'live'); take(JSON.parse(e.data), true); });
    es.addEventListener('delta', (e) => {
      const msg = JSON.parse(e.data);
      if (msg.seq !== seq + 1) { es.close(); connect(); return; } // out of step: ask for a snapshot
      take(msg, false);
    });
    es.addEventListener('open', () => setConn(true, 'live'));
    es.addEventListener('error', () => setConn(false, 'disconnected: values as of ' + new Date(lastNow).toLocaleTimeString()));
  }
  connect();
})();
