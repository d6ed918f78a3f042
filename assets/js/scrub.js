// The scrubber: step slider, ◀ / ▶ / play, the selected position and the run's link, all in the browser.
// It reads the finished run's per-step data (#run-data, explorer/scrub.py) and redraws the text and candidates from
// it (textHtml and candHtml port explorer/scrub.py's text_html and candidates_html line by line), moves the
// shapes named "cursor" (or "cursor-edge") / "selected" of the visible figures, keeps the address bar and the link at the step, and
// asks the server only for the views it must draw itself ("server" views), once the step settles.
const q = (s) => element.querySelector(s);
const range = q('.um-range'), label = q('.um-step-label'), posBox = q('.um-pos-box'), link = q('.um-link');
let run = null, dataKey = null, step = 1, sel = null, timer = null, settle = null;
// a shared link's selected position, applied to the first live run it opens
let linkSel = parseInt(new URLSearchParams(location.search).get('pos'));
// and its view tab, opened on the first live run it opens when the run fills it (the server selects it too; a
// selection sent while the tab's button was still hidden for the page's previous run could be lost)
let linkTab = new URLSearchParams(location.search).get('tab');
const speed = q('.um-speed');

const esc = (t) => String(t).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  .replace(/"/g, '&quot;').replace(/'/g, '&#x27;');
const at = (changes, s) => { let out = null; for (const [t, v] of changes) { if (t > s) break; out = v; } return out; };
const fmt = (k, digits) => (k === null ? '–' : (k / 10 ** digits).toFixed(digits));
const hue = (k) => (k === null ? '#e8e8e8' : `hsl(${Math.floor(120 * k / 100)}, 70%, 82%)`);

function revisedFrom(changes, s, t, since) {   // from the slot's first commit on (before it: a canvas's noise)
  let out = null;
  for (const [step, v] of changes) {
    if (step > s) break;
    if (step < since) continue;
    if (v !== -1 && v !== t) out = v; else if (v === -1) out = null;
  }
  return out;
}

function chips(d, s, selected) {
  const out = [], stop = d.stop === undefined ? -1 : d.stop;
  const ended = stop >= 0 && ![null, -1].includes(at(d.tok[stop], s));
  for (let j = 0; j < d.pos.length; j++) {
    const pos = d.pos[j];
    if (ended && j > stop) break;
    const t = at(d.tok[j], s), cls = ['um-tok'];
    let text, cont, bg, title, old = null;
    if (t === null || t === -1) {
      const c = d.cand[j].find((e) => e[0] === s);
      cls.push('um-mask');
      [text, cont, bg, title] = ['\u25a2', false, '#f3f3f3', 'masked'];
      if (c) {
        cls.push('um-draft');
        text = d.disp[c[1]][0];
        title = `masked; this step's draft is "${text}" (p ${fmt(c[2], 2)})`;
      }
    } else if (!d.new[j].some((x) => x <= s)) {
      [text, cont] = d.disp[t];
      cls.push('um-noise');
      [bg, title] = ['#f3f3f3', 'noise: a random token the canvas has not kept yet'];
    } else {
      [text, cont] = d.disp[t];
      bg = hue(d.cconf[j]);
      const now = d.new[j].includes(s);
      title = now ? `decoded at this step with p ${fmt(d.cconf[j], 2)}` :
        `decoded at step ${d.cstep[j] + 1} with p ${fmt(d.cconf[j], 2)}`;
      if (now) cls.push('um-new');
      const r = revisedFrom(d.tok[j], s, t, Math.min(...d.new[j]));
      if (r !== null) { old = d.disp[r][0]; cls.push('um-rev'); title += `; revised from "${old}"`; }
    }
    if (cont) cls.push('um-cont');
    if (selected === pos) cls.push('um-sel');
    out.push({cls: cls.join(' '), pos, text, title: `position ${pos}: ${title}`, bg, old});
  }
  if (ended && stop + 1 < d.pos.length) {
    const n = d.pos.length - stop - 1;
    out.push({cls: 'um-tok um-fold', pos: d.pos[stop + 1], text: `+${n}`, old: null, bg: '#f3f3f3',
      title: `position ${d.pos[stop + 1]}: ${n} slots after the stop token, folded`});
  }
  return out;
}

const chipHtml = (c) => `<span class='${c.cls}' data-pos='${c.pos}' style='background:${c.bg}' ` +
  `title='${esc(c.title)}'>${c.old !== null ? `<s>${esc(c.old)}</s>\u2192` : ''}${esc(c.text)}</span>`;
const blockLabel = (b) => (b >= 0 ? String(b + 1) : 'prompt');

function textHtml(d, s, selected) {
  const spans = chips(d, s, selected).map(chipHtml).join('');
  const [block, kind] = d.rec[s];
  const note = d.ended ? `<div class='um-ended' role='status'>${esc(d.ended)}</div>` : '';
  return `<div class='um-text' data-run='${esc(d.run)}' data-finished='1'><div class='um-step'>step ${s + 1} / ` +
    `${d.n} · block ${blockLabel(block)} · ${esc(kind)}</div>${note}<span class='um-prompt'>${esc(d.prompt)}</span> ${spans}</div>`;
}

function candHtml(d, s, selected) {
  if (selected === null || d.n === 0) return "<div class='um-cand'>Click a token (or pick a position) to see its candidates.</div>";
  const j = selected - d.P;
  if (!(j >= 0 && j < d.pos.length)) return `<div class='um-cand'>Position ${selected} is not in the generated region.</div>`;
  const seen = d.topk[j].filter((e) => e[0] <= s);
  if (!seen.length) return `<div class='um-cand'>Position ${selected} has not been scored while masked yet at step ${s + 1}.</div>`;
  const [t, ids, ps] = seen[seen.length - 1];
  const cs = d.cstep[j], fin = at(d.tok[j], d.n - 1);
  const status = (cs >= 0 && cs <= s && fin !== null && fin !== -1) ? `committed at step ${cs + 1} as "${esc(d.raw[fin])}"` : 'still masked';
  const rows = ids.map((i, k) => `<div class='um-cand-row'><span class='um-cand-tok'>${esc(d.raw[i])}</span>` +
    `<span class='um-cand-bar' style='width:${Math.max(1, Math.floor(240 * ps[k] / 1000))}px'></span>` +
    `<span>${fmt(ps[k], 3)}</span></div>`).join('');
  return `<div class='um-cand'><b>position ${selected}</b> · step ${t + 1} · ${status}<div>${rows}</div></div>`;
}

const plotOf = (id) => document.querySelector('#' + id + ' .js-plotly-plot');
const visible = (el) => !!el && el.offsetParent !== null;

// Plotly.relayout re-runs the figure's defaults over every cell (~40 ms on a 256 x 256 map), so a moved line is
// redrawn here: its layout entry is updated (Plotly redraws from it on zoom) and its SVG path moved to the pixel.
function place(gd, i, ax, v) {
  const sh = gd.layout.shapes[i], full = gd._fullLayout.shapes[i], path = gd.querySelector(`.shapelayer path[data-index="${i}"]`);
  const m = path && /^M([^,]+),([^L]+)L([^,]+),(.+)$/.exec(path.getAttribute('d'));
  const axis = ax === 'x' ? gd._fullLayout[(sh.xref || 'x').replace(/^x(\d*).*/, 'xaxis$1')] : gd._fullLayout[(sh.yref || 'y').replace(/^y(\d*).*/, 'yaxis$1')];
  if (!m || !full || !axis || !axis.l2p) return false;
  sh[ax + '0'] = sh[ax + '1'] = full[ax + '0'] = full[ax + '1'] = v;
  const px = axis._offset + axis.l2p(v);
  path.setAttribute('d', ax === 'x' ? `M${px},${m[2]}L${px},${m[4]}` : `M${m[1]},${px}L${m[3]},${px}`);
  return true;
}

function moveShapes(gd) {   // the cursor to the step, the selected column to the position
  if (!visible(gd) || !gd.layout || !gd._fullLayout || !window.Plotly) return;
  const edit = {};
  (gd.layout.shapes || []).forEach((sh, i) => {
    if (sh.name === 'cursor' || sh.name === 'cursor-edge') {     // an edge cursor runs along its row's lower edge
      const ax = sh.y0 === sh.y1 && sh.xref !== 'x' ? 'y' : 'x', at = step + (sh.name === 'cursor-edge' ? 0.5 : 0);
      if (sh[ax + '0'] !== at && !place(gd, i, ax, at)) { edit[`shapes[${i}].${ax}0`] = at; edit[`shapes[${i}].${ax}1`] = at; }
    } else if (sh.name === 'selected') {
      const on = sel !== null && sel - run.P >= 0 && sel - run.P < run.pos.length;
      if (sh.visible !== on) { edit[`shapes[${i}].visible`] = on; edit[`shapes[${i}].x0`] = edit[`shapes[${i}].x1`] = on ? sel - run.P : 0; }
      else if (on && sh.x0 !== sel - run.P && !place(gd, i, 'x', sel - run.P)) { edit[`shapes[${i}].x0`] = edit[`shapes[${i}].x1`] = sel - run.P; }
    }
  });
  if (Object.keys(edit).length) window.Plotly.relayout(gd, edit);
}

// Plotly fills colour bars with url(<page address>#gradient); once the address bar moves (replaceState) such a
// reference points at another document and the bar renders empty: make every one local again
function localGradients() {
  document.querySelectorAll('.js-plotly-plot [fill*="url("], .js-plotly-plot [style*="url("]').forEach((e) => {
    for (const k of ['fill', 'stroke']) {
      const v = e.getAttribute(k), w = e.style.getPropertyValue(k);
      if (v && /url\(["']?[^#"')]+#/.test(v)) e.setAttribute(k, v.replace(/url\((["']?)[^#"')]+#/, 'url($1#'));
      if (w && /url\(["']?[^#"')]+#/.test(w)) e.style.setProperty(k, w.replace(/url\((["']?)[^#"')]+#/, 'url($1#'));
    }
  });
}

// the address's page-level parameters (the theme, ?__theme=dark; explorer/state.py's KEPT_KEYS), kept in every
// address the page makes: the link box, the address bar, and a link of the page to another run
const keptKeys = (element.querySelector('.um-scrub').dataset.kept || '').split(',').filter(Boolean);
function kept() {
  const here = new URLSearchParams(location.search), out = new URLSearchParams();
  keptKeys.forEach((k) => { if (here.has(k)) out.set(k, here.get(k)); });
  return out.toString();
}
function url() {
  const k = kept();
  return location.origin + location.pathname + '?' + run.query + (run.query ? '&' : '') + 'step=' + step +
    (sel === null ? '' : '&pos=' + sel) + (k ? '&' + k : '');
}
document.addEventListener('click', (e) => {      // the page's own links to a run ("?…"): the theme goes with them
  const a = e.target.closest && e.target.closest('a[href^="?"]'), k = kept();
  if (!a || !k || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  location.assign(a.getAttribute('href') + '&' + k);
});

function draw() {
  if (!run) return;
  const s = step - 1, txt = document.querySelector('#text .um-text');
  if (txt) txt.outerHTML = textHtml(run, s, sel);
  const cand = document.querySelector('#candidates .um-cand');
  if (cand) cand.outerHTML = candHtml(run, s, sel);
  range.value = step; label.textContent = stepLabel(); posBox.value = sel === null ? '' : sel;
  document.querySelectorAll('.js-plotly-plot').forEach(moveShapes);
  link.value = url();
  if (!run.example) { history.replaceState(null, '', url()); localGradients(); }
  clearTimeout(settle);
  settle = setTimeout(askServer, 200);
}

// every ask is sent (gradio's "always_last" replays the first deferred ask's data, not the last's) and numbered:
// the server draws an ask only if it is newer than the last it drew, so a late stale one never overwrites
let asked = 0;
const ask = (ids) => { if (ids.length) trigger('submit', {step, pos: sel, views: ids, seq: ++asked}); };
function askServer() {      // the visible views the server draws itself, at the settled step
  if (!run) return;         // a new run began streaming since
  ask(run.server.filter((id) => visible(plotOf(id)) || visible(document.getElementById(id))));
}

// a figure gradio dropped: one sent while its tab was being opened (a link's tab, a cached run whose pieces
// arrive at once) can land before the tab's figure exists, which then shows gradio's empty box for good. Once the
// figures sent with a run have had their turn (one drawn since it was shown and none for 300 ms, or 3 s without
// any: an open's first figures wait for Plotly to load, 1-2 s), each visible view still empty is asked of the server
// again, once a run. Looked at sooner, every open asked for the four figures it was about to draw (drawn twice).
let shownAt = 0, drawnAt = 0, refilled = new Set(), refillTimer = 0;
function refill() {
  if (!run) return;
  const now = performance.now();
  if (drawnAt > shownAt ? now - drawnAt < 300 : now - shownAt < 3000) {
    clearTimeout(refillTimer); refillTimer = setTimeout(refill, 150); return; }
  const ids = (run.views || []).filter((id) => { const e = document.getElementById(id);
    return !refilled.has(id) && visible(e) && !e.querySelector('.js-plotly-plot') && e.querySelector('.empty'); });
  ids.forEach((id) => refilled.add(id));
  ask(ids);
}

// a run stopped before its end (Stop, a request limit) says so beside its step too: its last step is not the text's
const stepLabel = () => `step ${step} / ${run.n}` + (run.ended ? ' (stopped)' : '');
function go(s) { if (run) { step = Math.min(Math.max(1, s | 0), run.n); draw(); } }
function select(pos) { if (run) { sel = Number.isInteger(pos) ? pos : null; draw(); } }
function stop() { clearInterval(timer); timer = null; }
function play() {
  if (!run) return;
  if (timer) return stop();
  if (step >= run.n) go(1);
  timer = setInterval(() => { if (step >= run.n) stop(); else go(step + 1); }, 1000 / (parseFloat(speed.value) || 3));
}

function load() {   // a new run (or a new step of one) has a new short key: the large JSON is read only then
  const el = document.querySelector('#run-data .um-run-data');
  const key = el ? el.dataset.key : null;
  if (key === dataKey) return;
  dataKey = key; stop(); tuneNote.textContent = '';
  run = el ? JSON.parse(el.dataset.json) : null;
  element.classList.toggle('um-idle', !run);
  // no run to scrub (one is streaming): the text view's line counts its steps, the slider waits for the total
  if (!run) { label.textContent = 'step – / –'; return; }
  document.dispatchEvent(new CustomEvent('um-run', {detail: run}));     // others that follow the run shown
  shownAt = performance.now(); refilled = new Set(); refill();
  step = run.step; sel = null; range.max = Math.max(1, run.n); range.value = step;
  label.textContent = stepLabel(); posBox.value = ''; link.value = url();
  if (!run.example) { history.replaceState(null, '', url()); localGradients(); }
  if (!run.example && Number.isInteger(linkSel)) { const p = linkSel; linkSel = NaN; select(p); }
  if (!run.example && linkTab && (run.tabs || []).includes(linkTab)) {
    const b = document.querySelector(`#view-tabs [role=tab][data-tab-id="${CSS.escape(linkTab)}"]`);
    linkTab = null;
    if (b && b.getAttribute('aria-selected') !== 'true') setTimeout(() => b.click(), 0);
    // and brought into sight: the page opens at its top, the tabs are a screen or more below (a phone: several)
    setTimeout(() => { const t = document.getElementById('view-tabs');
      if (t) t.scrollIntoView({block: 'start', behavior: 'instant'}); }, 120);
  }
}

// tune by eye: while a dial is dragged (τ of the threshold family, EB's γ), the confidence map of the run shown
// marks the cells that would pass the new value at the step they were scored (the per-step confidences, or the γ
// each EB slot needed, are already here; no server call)
const tuneNote = q('.um-tune');
const DIALS = {
  tau: {sym: 'τ', cells: () => run.cand, pass: (h, k) => h >= k, words: 'clear the bar'},
  entropy_bound: {sym: 'γ', cells: () => run.need, pass: (h, k) => h <= k, words: 'fit under the bound'}};
function tune(v, dialBox) {
  const gd = run && plotOf(run.tune_map), dial = run && DIALS[run.tune];
  if (!dial || !gd || !gd.data || !window.Plotly || isNaN(v)) return;
  const k = Math.round(v * 100), labels = gd.data[0].x, xs = [], ys = [], name = `would pass ${dial.sym}`;
  let lo = Infinity, hi = -Infinity, fewer = 0;
  dial.cells().forEach((c, j) => c.forEach((e) => {
    const s = e[0], h = e[e.length - 1];
    if (h === null) return;
    const now = run.new[j].includes(s);
    if (dial.pass(h, k) && !now) { xs.push(labels[j]); ys.push(s + 1); lo = Math.min(lo, s); hi = Math.max(hi, s); }
    if (now && !dial.pass(h, k)) fewer += 1;
  }));
  const i = gd.data.findIndex((t) => t.name === name);
  // the confidences cluster, so most values of a drag mark the cells the last one did: then no figure is drawn again
  const marks = `${dataKey}|${xs}|${ys}`, same = i >= 0 && gd.__umMarks === marks;
  gd.__umMarks = marks;
  if (i < 0) window.Plotly.addTraces(gd, {type: 'scatter', mode: 'markers', name, x: xs, y: ys,
    hoverinfo: 'skip', showlegend: false, marker: {symbol: 'square-open', size: 10, color: '#ff00ff', line: {width: 2}}});
  else if (!same) window.Plotly.restyle(gd, {x: [xs], y: [ys]}, [i]);
  peekAt(gd, name, dialBox, same);
  tuneNote.textContent = `at ${dial.sym} ${v.toFixed(2)}, ${xs.length} more token${xs.length === 1 ? '' : 's'} ` +
    `would ${dial.words}` + (xs.length ? ` in steps ${lo + 1}–${hi + 1} of this run` : '') +
    ' (magenta squares on the confidence map)' + (fewer ? `; ${fewer} of its commits do not ${dial.words} at ` +
    `${dial.sym} ${v.toFixed(2)} (a forward always commits at least its best token)` : '') + '. ' +
    'After the first extra commit the real run diverges: release the slider to decode it.';
}
// the map is often far below the dial (on a projector, on a phone): while it is out of sight a small copy of it,
// pinned in a corner, carries the preview, until the dial is released
let peek = null;
// the corner hides nothing it speaks of: not the dial being dragged, its note, the scrubber's ◀ ▶ buttons, nor the
// settings beside it where the page has room beside them (a projector); the first corner clear of all of them (a
// phone's copy spans the width, so only top or bottom counts there)
// Run, Stop and the tour's button are never covered: where every corner would, no copy is pinned (false)
function placePeek(dialBox) {
  const col = document.getElementById('params-col'), w = Math.min(420, innerWidth - 20) + 2, h = 252, m = 12;
  if (!col || !dialBox) return false;
  const c = col.getBoundingClientRect(), beside = c.left >= w + 24 || innerWidth - c.right >= w + 24;
  const onScreen = (r) => r.height && r.bottom > 0 && r.top < innerHeight;
  const never = ['run', 'stop', 'tour-start'].map((id) => document.getElementById(id)).filter(Boolean)
    .map((e) => e.getBoundingClientRect()).filter(onScreen);
  const avoid = [dialBox, document.getElementById('tune-note'), q('.um-prev'), q('.um-next'), ...(beside ? [col] : [])]
    .filter(Boolean).map((e) => e.getBoundingClientRect()).filter(onScreen).concat(never);
  const meets = (a, b) => !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top);
  const narrow = innerWidth <= 500;
  const at = ([left, top]) => { const x = narrow ? 8 : left ? m : innerWidth - m - w, y = top ? m : innerHeight - m - h;
    return {left: x, top: y, right: narrow ? innerWidth - 8 : x + w, bottom: y + h}; };
  const corners = [[beside && c.left >= w + 24, false], [!(beside && c.left >= w + 24), false], [false, true], [true, true]];
  const best = corners.map((k) => [k, avoid.filter((r) => meets(at(k), r)).length]).sort((a, b) => a[1] - b[1])[0][0];
  if (never.some((r) => meets(at(best), r))) return false;
  peek.classList.toggle('um-peek-left', !narrow && best[0]);
  peek.classList.toggle('um-peek-top', best[1]);
  return true;
}
function peekAt(gd, name, dialBox, same) {
  const r = gd.getBoundingClientRect();
  if (r.top >= 0 && r.bottom <= innerHeight) { if (peek) peek.style.display = 'none'; return; }
  if (!peek) { peek = document.createElement('div'); peek.id = 'um-tune-peek'; document.body.appendChild(peek); }
  if (!placePeek(dialBox)) { peek.style.display = 'none'; return; }
  peek.style.display = '';
  const mine = peek.data ? peek.data.findIndex((t) => t.name === name) : -1, i = gd.data.findIndex((t) => t.name === name);
  if (peek.__umKey === dataKey && mine >= 0) {
    if (!same) window.Plotly.restyle(peek, {x: [gd.data[i].x], y: [gd.data[i].y]}, [mine]);
    return;
  }
  peek.__umKey = dataKey;
  window.Plotly.react(peek, gd.data, Object.assign({}, gd.layout, {width: Math.min(420, innerWidth - 20), height: 250, shapes: [],
    annotations: [], margin: {l: 34, r: 8, t: 26, b: 26}, title: {text: 'confidence map · magenta: would pass',
    font: {size: 12}}}), {displayModeBar: false, staticPlot: true});
}
document.addEventListener('input', (e) => {
  const box = e.target.closest && run && run.tune && e.target.closest('#' + run.tune);
  if (box) tune(parseFloat(e.target.value), box);
});
document.addEventListener('change', (e) => {
  if (peek && e.target.closest && run && run.tune && e.target.closest('#' + run.tune)) peek.style.display = 'none';
});

q('.um-prev').addEventListener('click', () => { stop(); go(step - 1); });
q('.um-next').addEventListener('click', () => { stop(); go(step + 1); });
q('.um-play').addEventListener('click', play);
speed.addEventListener('change', () => { if (timer) { stop(); play(); } });
range.addEventListener('input', () => { stop(); go(parseInt(range.value)); });
posBox.addEventListener('change', () => { const p = parseInt(posBox.value); select(isNaN(p) ? null : p); });
q('.um-copy').addEventListener('click', () => { link.select(); navigator.clipboard && navigator.clipboard.writeText(link.value); });
document.addEventListener('click', (e) => {
  const t = e.target.closest && e.target.closest('#text [data-pos]');
  if (t) select(parseInt(t.dataset.pos));
  if (e.target.closest && e.target.closest('[role=tab]')) setTimeout(() => { if (run) draw(); }, 60);
});
// keys (the scrubber's line says so): ← / → step and space plays, unless a control that takes keys has the focus
const takesKeys = (t) => t.closest && t.closest('input, textarea, select, button, [contenteditable], [role=tab]');
document.addEventListener('keydown', (e) => {
  if (!run || e.altKey || e.ctrlKey || e.metaKey || takesKeys(e.target)) return;
  if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') { e.preventDefault(); stop(); go(step + (e.key === 'ArrowRight' ? 1 : -1)); }
  else if (e.key === ' ') { e.preventDefault(); play(); }
});
// a tuning slider moved with the keys re-runs when the keys rest, as gradio re-runs it on the pointer's release
// (its range input answers pointerup only); held keys make one re-run, not one per step of the dial
let keyRest = null;
document.addEventListener('keyup', (e) => {
  const r = e.target;
  if (!r.matches || !r.matches('#params-col input[type=range]') || !/^(Arrow|Page|Home|End)/.test(e.key)) return;
  clearTimeout(keyRest);
  keyRest = setTimeout(() => r.dispatchEvent(new PointerEvent('pointerup', {bubbles: true})), 250);
});
// the step × position maps whose cells select a position: the page lists them in the run's data (the registry's)
const bind = () => ((run && run.maps) || []).forEach((id) => {
  const gd = plotOf(id);
  if (!gd || gd.__umBound || !gd.on) return;
  gd.__umBound = true;
  gd.on('plotly_click', (ev) => { const p = parseInt(String(ev.points[0].x)); if (!isNaN(p)) select(p); });
});
// a figure drawn after the run arrived (a tab opened later, a server view) gets the cursor at the step shown
// on a narrow figure (a phone's, a 780 px window's) a step × position map shows a few position labels, not forty
const NARROW_TICKS = 6;
function thinTicks(gd) {
  const ax = gd.layout && gd.layout.xaxis;
  if (narrowFigure(gd) && ax && ax.type === 'category' && ax.nticks !== NARROW_TICKS && window.Plotly)
    window.Plotly.relayout(gd, {'xaxis.nticks': NARROW_TICKS, 'xaxis.tickangle': -90});
  // and a heatmap's tokens printed in its cells (the canvas map) would overprint: the hover keeps them
  const cells = (gd.data || []).map((t, i) => (t.type === 'heatmap' && t.texttemplate ? i : -1)).filter((i) => i >= 0);
  if (narrowFigure(gd) && cells.length && window.Plotly) window.Plotly.restyle(gd, {texttemplate: ''}, cells);
  // and a legend beside the plot goes under it, a title too wide breaks (assets/js/legend_under.js)
  // (one change a draw: the relayout draws again, and the next call sees the figure it made)
  const fit = window.Plotly && (legendUnder(gd) || titleWrap(gd));
  if (fit) window.Plotly.relayout(gd, fit);
}
const follow = () => document.querySelectorAll('.js-plotly-plot').forEach((gd) => {
  if (gd.__umFollow || !gd.on) return;
  gd.__umFollow = true;
  gd.on('plotly_afterplot', () => { drawnAt = performance.now(); if (run) moveShapes(gd); localGradients(); thinTicks(gd); });
});
// only the view tabs with something to show for the run (the run's data lists them)
const hideTabs = () => { if (run && run.tabs) document.querySelectorAll('#view-tabs [role=tab]').forEach((b) => {
  const want = run.tabs.includes(b.dataset.tabId) ? '' : 'none'; if (b.style.display !== want) b.style.display = want; });
  // and the line under them names only the tabs left out, with the decoders that fill them (explorer/page/more_views)
  if (run && run.tabs) document.querySelectorAll('#um-more-views [data-tab]').forEach((e) => {
    const want = run.tabs.includes(e.dataset.tab) ? 'none' : ''; if (e.style.display !== want) e.style.display = want; });
  // and in a tab only the views this run fills, with their notes (no other decoder's placeholder)
  if (run && run.views) document.querySelectorAll('#view-tabs [id$="-plot"]').forEach((e) => {
    const want = run.views.includes(e.id) ? '' : 'none';
    for (const el of [e, document.getElementById(e.id + '-note')]) if (el && el.style.display !== want) el.style.display = want; }); };
// the line naming the tabs this run leaves out goes right under the tab strip: gradio places a block only after
// the tabs' panels (2 800 px down, below the Decode tab's figures). A copy there (a node of ours beside gradio's,
// not gradio's own block moved out of its column); the block itself stays hidden.
const placeMore = () => { const src = document.querySelector('#more-views .um-more-views');
  const strip = document.querySelector('#view-tabs > .tab-wrapper');
  if (!src || !strip || document.getElementById('um-more-views')) return;
  const copy = src.cloneNode(true); copy.id = 'um-more-views'; strip.after(copy);
  document.getElementById('more-views').style.display = 'none'; };
// while a run is on (the Run button says "Running…") and Run is out of sight, a sign pinned at the bottom says so:
// a re-run started from a dial far below Run (a phone) shows it where the visitor is
// Run's box is read only while a run is on, once a frame: read on every DOM mutation it forced a layout each time
// (0.6 s of the page's main thread over the tour's ten moves)
const busyNow = () => { busyQueued = false; const b = document.getElementById('run'); if (!b) return;
  let sign = document.getElementById('um-busy');
  if (!sign) { sign = document.createElement('div'); sign.id = 'um-busy'; sign.setAttribute('role', 'status');
    sign.textContent = 'Running… the text view above updates'; document.body.appendChild(sign); }
  const on = b.textContent.trim().startsWith('Running'), r = on && b.getBoundingClientRect();
  const want = on && !(r.bottom > 0 && r.top < innerHeight) ? 'block' : 'none';
  if (sign.style.display !== want) sign.style.display = want; };
let busyQueued = false;
const busy = () => { if (!busyQueued) { busyQueued = true; requestAnimationFrame(busyNow); } };
addEventListener('scroll', busy, {passive: true});
// gradio's placeholder of an empty file box names a plain div (an aria-label without a role, which assistive
// technology ignores: axe's aria-prohibited-attr): it is a picture of an empty box, so it gets the image role
const named = () => document.querySelectorAll('div.empty[aria-label]:not([role])').forEach((e) => e.setAttribute('role', 'img'));
new MutationObserver(() => { load(); bind(); follow(); placeMore(); hideTabs(); named(); busy(); refill(); }).observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['data-key']});
window.__umScrub = {go, select, get step() { return step; }, get sel() { return sel; }, get run() { return run; },
  textHtml, candHtml};
load(); bind(); follow(); placeMore(); hideTabs(); named();
