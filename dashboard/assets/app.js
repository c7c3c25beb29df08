// The fusebox dashboard: renders the status streamed by api/events.
//
// Breaker names and every other value from the server are data: they reach
// the page through textContent and element properties only, never as markup.
'use strict';

(function () {
  const tokenMeta = document.querySelector('meta[name="fusebox-token"]');
  const token = tokenMeta ? tokenMeta.content : '';
  const grid = document.getElementById('breakers');
  const empty = document.getElementById('empty');
  const conn = document.getElementById('conn');
  const connText = document.getElementById('conn-text');
  const cards = new Map(); // breaker name -> card
  let updates = 0;

  const COUNTERS = [
    ['calls', 'calls', 'Calls that asked for a permit and finished, declined ones included'],
    ['successes', 'success', 'Calls released as a success'],
    ['failures', 'failure', 'Calls released as a failure'],
    ['ignored', 'ignored', 'Calls released as ignored (for example canceled)'],
    ['declined', 'declined', 'Calls declined while open or probing'],
    ['stale', 'stale', 'Releases of permits granted before the breaker last changed state'],
    ['dropped_events', 'dropped', 'Events of this breaker that a subscriber of the manager lost to a full buffer'],
    ['missed_transitions', 'missed', 'Transitions this page did not see because its event buffer was full'],
  ];

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function stateLabel(s) { return s === 'half_open' ? 'half open' : s; }

  // span formats a duration in milliseconds as "850ms", "12s", "3m 04s",
  // "2h 05m" or "3d 4h".
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

  function newCard(name) {
    const c = { name: name };
    c.root = el('section', 'card');
    const head = el('div', 'card-head');
    c.nameEl = el('h2', 'name', name);
    c.pill = el('span', 'pill state');
    c.forced = el('span', 'pill forced', 'forced');
    head.append(c.nameEl, c.pill, c.forced);
    c.since = el('p', 'since');
    const dl = el('dl', 'counters');
    c.counters = {};
    for (const [key, label, help] of COUNTERS) {
      const box = el('div', 'counter ' + label.split(' ')[0]);
      box.title = help;
      const dt = el('dt', '', label);
      const dd = el('dd', '', '0');
      dd.dataset.counter = key;
      box.append(dt, dd);
      dl.append(box);
      c.counters[key] = dd;
    }
    c.bar = el('div', 'bar');
    c.bar.setAttribute('role', 'img');
    const axis = el('div', 'axis');
    c.axisFrom = el('span', '');
    c.axisTo = el('span', '', 'now');
    axis.append(c.axisFrom, c.axisTo);
    c.log = el('ol', 'log');
    c.note = el('p', 'note');
    c.root.append(head, c.since, dl, c.bar, axis, c.log, c.note);
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
    c.actions.append(c.forceBtn, c.resetBtn);
    c.root.append(c.actions, c.error);
  }

  function act(c, what) {
    c.error.textContent = '';
    const body = new URLSearchParams();
    body.set('breaker', c.name);
    fetch('api/' + what, {
      method: 'POST',
      headers: { 'X-Fusebox-Token': token },
      body: body,
      credentials: 'same-origin',
    }).then((r) => {
      if (!r.ok) return r.text().then((t) => { c.error.textContent = what + ' failed: ' + t.trim(); });
    }).catch((err) => { c.error.textContent = what + ' failed: ' + err; });
  }

  function renderTimeline(c, b, now) {
    const recs = b.transitions || [];
    const nowMs = now.getTime();
    let start = new Date(b.since).getTime();
    if (recs.length > 0) {
      const first = new Date(recs[0].at).getTime();
      start = first - Math.max(1000, (nowMs - first) * 0.08);
    }
    start = Math.min(start, nowMs - 10000);
    const total = nowMs - start;
    const segs = [];
    let state = recs.length > 0 ? recs[0].from : b.state;
    let from = start;
    for (const r of recs) {
      const at = new Date(r.at).getTime();
      segs.push([state, from, at]);
      state = r.to;
      from = at;
    }
    segs.push([b.state, from, nowMs]);
    const bar = [];
    for (const [st, a, z] of segs) {
      const s = el('div', 'seg ' + st);
      s.style.flexGrow = String(Math.max(z - a, 0) / total);
      s.title = stateLabel(st) + ' for ' + span(z - a);
      bar.push(s);
    }
    c.bar.replaceChildren(...bar);
    c.bar.setAttribute('aria-label', 'timeline of the last ' + span(total));
    c.axisFrom.textContent = span(total) + ' ago';

    const items = [];
    for (let i = recs.length - 1; i >= 0; i--) {
      const r = recs[i];
      const li = el('li');
      const when = el('span', 'when', span(nowMs - new Date(r.at).getTime()) + ' ago');
      when.title = r.at;
      const cause = el('span', 'cause', r.cause.replace('_', ' ') + (r.outcome ? ' \u00b7 ' + r.outcome : ''));
      li.append(when, el('span', 'st ' + r.from, stateLabel(r.from)), el('span', 'arrow', '\u2192'),
        el('span', 'st ' + r.to, stateLabel(r.to)), cause);
      items.push(li);
    }
    if (items.length === 0) items.push(el('li', 'none', 'no transitions since the dashboard started'));
    c.log.replaceChildren(...items);
    c.note.textContent = b.missed_transitions > 0
      ? b.missed_transitions + ' transition(s) not shown: the dashboard\'s event buffer was full'
      : '';
  }

  function renderCard(c, b, now, actions) {
    c.root.className = 'card ' + b.state;
    c.root.dataset.state = b.state;
    c.pill.className = 'pill state ' + b.state;
    c.pill.textContent = stateLabel(b.state);
    c.forced.hidden = !b.forced;
    let since = stateLabel(b.state) + ' for ' + span(now - new Date(b.since));
    if (b.forced) {
      since += ' \u00b7 forced open until reset';
    } else if (b.until) {
      const left = new Date(b.until) - now;
      if (b.state === 'open') since += ' \u00b7 probe allowed in ' + span(left);
      else if (b.state === 'probing') since += ' \u00b7 probe times out in ' + span(left);
    }
    c.since.textContent = since;
    c.since.title = 'since ' + b.since;
    for (const [key] of COUNTERS) {
      c.counters[key].textContent = String(b[key]);
      c.counters[key].classList.toggle('zero', b[key] === 0);
    }
    renderTimeline(c, b, now);
    if (actions && !c.actions) addActions(c);
    if (c.actions) {
      c.actions.hidden = !actions;
      c.forceBtn.disabled = b.forced;
    }
  }

  function render(status) {
    const now = new Date(status.now);
    const seen = new Set();
    let i = 0;
    for (const b of status.breakers) {
      let c = cards.get(b.name);
      if (!c) {
        c = newCard(b.name);
        cards.set(b.name, c);
      }
      seen.add(b.name);
      renderCard(c, b, now, status.actions);
      // Registration order; a card already in place is not moved, so its
      // scroll position and focus survive the update.
      if (grid.children[i] !== c.root) grid.insertBefore(c.root, grid.children[i] || null);
      i++;
    }
    for (const [name, c] of cards) {
      if (!seen.has(name)) {
        c.root.remove();
        cards.delete(name);
      }
    }
    empty.hidden = status.breakers.length > 0;
    updates++;
    document.body.dataset.updates = String(updates);
  }

  function setConn(cls, text) {
    conn.className = 'conn ' + cls;
    connText.textContent = text;
  }

  const es = new EventSource('api/events');
  es.addEventListener('status', (e) => {
    setConn('live', 'live');
    render(JSON.parse(e.data));
  });
  es.addEventListener('open', () => setConn('live', 'live'));
  es.addEventListener('error', () => setConn('down', 'reconnecting\u2026'));
})();
