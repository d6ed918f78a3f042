// A figure under 700 px wide (a phone's, and a 780 px window's two-column page's 386 px) is narrow: its legend
// and its category axis's labels are laid out for that width, whatever the window's.
const narrowFigure = (gd) => !!gd._fullLayout && gd._fullLayout.width < 700;
// On a phone a legend beside the plot takes a third of its width, and one above it (S2D2's router) pushes the
// plot down under its own label: either goes under the plot, below the lowest of the x axis's labels and title
// as drawn, and the figure grows by it (the plot keeps its size). Loaded before scrub.js, which calls it after
// each draw; tools/page/bench_figures.py runs the same function in its check.
function legendUnder(gd, narrow = narrowFigure(gd)) {
  const fl = gd._fullLayout;
  if (!narrow || !fl || !fl.showlegend || fl.legend.orientation === 'h' && fl.legend.y < 1) return null;
  const items = gd.querySelectorAll('.legend .traces').length;
  const svg = gd.querySelector('.main-svg');
  if (!items || !svg) return null;
  const top = svg.getBoundingClientRect().top;
  let low = fl._size.t + fl._size.h;            // px from the figure's top: the plot's bottom, then its labels
  gd.querySelectorAll('.xtick text, [class^=g-x] text').forEach((e) => {
    low = Math.max(low, e.getBoundingClientRect().bottom - top); });
  // its rows as the items will pack across the figure's width (as drawn now, one per line), and its title's line
  let rows = 1, used = 0;
  gd.querySelectorAll('.legend .traces').forEach((t) => { const w = t.getBBox().width + 12;
    if (used && used + w > fl.width - 16) { rows += 1; used = 0; } used += w; });
  rows += fl.legend.title && fl.legend.title.text ? 1 : 0;
  const extra = Math.max(0, low + 8 + 22 * rows - fl.height) + 4;
  const height = fl.height + extra;
  // the right margin a view kept for its legend is given back to the plot, unless a right-hand axis needs it
  const rightAxis = Object.keys(fl).some((k) => /^yaxis\d*$/.test(k) && fl[k].side === 'right' && fl[k].visible);
  return {'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left', 'legend.yanchor': 'top',
    'legend.yref': 'container', 'legend.y': 1 - (low + 6) / height, height, 'margin.b': fl.margin.b + extra,
    'margin.r': rightAxis ? fl.margin.r : Math.min(fl.margin.r, 24)};
}
// a title wider than the figure (at any width: a 780 px window draws 386 px figures) breaks into lines at spaces,
// as many words a line as the figure's width holds; the figure grows by the lines instead of the title running off
// its edges. Measured as drawn: a line still too wide at the next draw is broken shorter (``room`` shrinks), so
// the breaks end within a few draws. The text's own breaks (<br>) stay.
function titleWrap(gd) {
  const fl = gd._fullLayout, t = gd.querySelector('.g-gtitle text');
  const text = fl && fl.title && fl.title.text;
  if (!t || !text) return null;
  const box = t.getBBox(), fits = box.width <= fl.width - 16;
  if (fits) return null;
  const mine = gd.__umTitle && gd.__umTitle.wrapped === text ? gd.__umTitle : {orig: text, room: Infinity};
  const plain = (s) => s.replace(/<[^>]*>/g, '');
  const lines = mine.orig.split('<br>');
  const widest = Math.max(...lines.map((l) => plain(l).length), 1);
  // characters a line holds: from the width of the widest line as drawn, one less each time that was not enough
  const room = Math.max(8, Math.min(mine.room - 1, Math.floor((fl.width - 24) * widest / box.width)));
  if (room >= mine.room) return null;
  const out = [];
  lines.forEach((line) => {                       // greedy, at spaces outside a tag
    let cur = '';
    line.split(/ (?![^<]*>)/).forEach((w) => {
      if (cur && plain(cur + ' ' + w).length > room) { out.push(cur); cur = w; } else cur = cur ? cur + ' ' + w : w; });
    out.push(cur);
  });
  const wrapped = out.join('<br>'), added = out.length - text.split('<br>').length;
  gd.__umTitle = {orig: mine.orig, room, wrapped};
  const line = 1.3 * ((fl.title.font && fl.title.font.size) || 16), height = fl.height + Math.max(0, added) * line;
  // hung from the figure's top: Plotly centres a title in the top margin, and its later lines ran into the plot
  return {'title.text': wrapped, 'margin.t': fl.margin.t + Math.max(0, added) * line, height,
    'title.yref': 'container', 'title.yanchor': 'top', 'title.y': 1 - 6 / height};
}
