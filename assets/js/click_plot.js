// Plotly figures render inside gr.Plot, which has no click event: bind plotly_click on the step x position
// maps (re-binding as figures are replaced) and report the clicked column's position, which every map's labels start with.
const ids = ['mask-plot', 'conf-plot', 'reason-plot', 'verifier-plot'];
const bind = () => ids.forEach(id => {
  const gd = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!gd || gd.__umBound || !gd.on) return;
  gd.__umBound = true;
  gd.on('plotly_click', ev => {
    const pos = parseInt(String(ev.points[0].x));
    if (!isNaN(pos)) trigger('click', {pos: pos});
  });
});
new MutationObserver(bind).observe(document.body, {childList: true, subtree: true});
bind();
