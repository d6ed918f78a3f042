// On a phone a legend beside the plot takes a third of its width, and one above it (S2D2's router) pushes the
// plot down under its own label: either goes under the plot, below the lowest of the x axis's labels and title
// as drawn, and the figure grows by it (the plot keeps its size). Loaded before scrub.js, which calls it after
// each draw; tools/page/bench_figures.py runs the same function in its check.
function legendUnder(gd, narrow = window.innerWidth < 700) {
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
  // the right margin a view kept for its legend is given back to the plot
  return {'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left', 'legend.yanchor': 'top',
    'legend.yref': 'container', 'legend.y': 1 - (low + 6) / height, height, 'margin.b': fl.margin.b + extra,
    'margin.r': Math.min(fl.margin.r, 24)};
}
// a title wider than the figure breaks before its first parenthesis, then (still too wide, at the next draw)
// after each semicolon; the figure grows by the lines instead of the title running off its right edge
function titleWrap(gd, narrow = window.innerWidth < 700) {
  const fl = gd._fullLayout, t = gd.querySelector('.g-gtitle text');
  const text = fl && fl.title && fl.title.text;
  if (!narrow || !t || !text || t.getBBox().width <= fl.width - 16) return null;
  const wrapped = !text.includes('<br>') ? text.replace(' (', '<br>(') : text.replace(/; /g, ';<br>');
  const lines = wrapped.split('<br>').length - text.split('<br>').length;
  return lines ? {'title.text': wrapped, 'margin.t': fl.margin.t + 22 * lines, height: fl.height + 22 * lines} : null;
}
