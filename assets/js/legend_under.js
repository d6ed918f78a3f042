// On a phone a legend beside the plot takes a third of its width: it goes under the plot, below the lowest of
// the x axis's labels and title as drawn, and the figure grows by it (the plot keeps its size). Loaded before
// scrub.js, which calls it after each draw; tools/page/bench_figures.py runs the same function in its check.
function legendUnder(gd, narrow = window.innerWidth < 700) {
  const fl = gd._fullLayout;
  if (!narrow || !fl || !fl.showlegend || fl.legend.orientation === 'h') return null;
  const items = gd.querySelectorAll('.legend .traces').length;
  const svg = gd.querySelector('.main-svg');
  if (!items || !svg) return null;
  const top = svg.getBoundingClientRect().top;
  let low = fl._size.t + fl._size.h;            // px from the figure's top: the plot's bottom, then its labels
  gd.querySelectorAll('.xtick text, [class^=g-x] text').forEach((e) => {
    low = Math.max(low, e.getBoundingClientRect().bottom - top); });
  const rows = Math.ceil(items / 2), extra = Math.max(0, low + 8 + 22 * rows - fl.height) + 4;
  const height = fl.height + extra;
  return {'legend.orientation': 'h', 'legend.x': 0, 'legend.xanchor': 'left', 'legend.yanchor': 'top',
    'legend.yref': 'container', 'legend.y': 1 - (low + 6) / height, height, 'margin.b': fl.margin.b + extra};
}
