// SVG export runs in the browser with the page's own plotly.js (each plot's toolbar also saves a PNG)
() => document.querySelectorAll('.js-plotly-plot').forEach((gd, i) => {
  if (!gd.offsetParent) return;
  const holder = gd.closest('[id]');
  Plotly.downloadImage(gd, {format: 'svg', filename: 'unmask-' + (holder ? holder.id : 'figure-' + i)});
})
