// The dashboard: one self-contained page (no external assets). Its script reads the token from
// the page URL (?token=...), polls /api/status every second and /api/history every two, and
// draws the progress, the loss and throughput charts (canvas, own code) and the rank table.
// The lagging-rank rule mirrors common/job_status.h (FlagRank).
#include "coordinator/ops/dashboard_page.h"

namespace ddp {

const char* DashboardHtml() {
  return R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>slurm-ddp job</title>
<style>
:root{--bg:#0f1419;--panel:#182029;--line:#2a3542;--fg:#dfe6ee;--dim:#8a99a8;--ok:#3fb950;
--warn:#d29922;--bad:#f85149;--blue:#58a6ff;--violet:#bc8cff}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg);
font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header{display:flex;align-items:center;gap:14px;padding:14px 22px;border-bottom:1px solid var(--line)}
h1{font-size:18px;margin:0;font-weight:600}.dim{color:var(--dim)}
.badge{padding:3px 10px;border-radius:12px;font-weight:600;font-size:12px;letter-spacing:.5px}
.s-RUNNING{background:#1f6feb33;color:var(--blue)}.s-SUCCEEDED{background:#23863633;color:var(--ok)}
.s-FAILED{background:#da363333;color:var(--bad)}.s-STOPPING{background:#9e6a0333;color:var(--warn)}
.s-REGISTERING{background:#8957e533;color:var(--violet)}.s-RECOVERING{background:#9e6a0333;color:var(--warn)}
main{padding:16px 22px;display:grid;gap:16px}
.cards{display:grid;grid-template-columns:repeat(6,1fr);gap:12px}
.card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.card .k{color:var(--dim);font-size:12px;text-transform:uppercase;letter-spacing:.6px}
.card .v{font-size:22px;font-weight:600;margin-top:2px;font-variant-numeric:tabular-nums}
.bar{height:10px;background:var(--line);border-radius:5px;overflow:hidden;margin-top:6px}
.bar>div{height:100%;background:linear-gradient(90deg,#1f6feb,#58a6ff);width:0}
.alert{background:#da36331a;border:1px solid var(--bad);border-radius:8px;padding:10px 14px;display:none}
.charts{display:grid;grid-template-columns:1fr 1fr;gap:12px}
canvas{width:100%;height:190px;display:block}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:10px 14px}
.panel h2{font-size:13px;margin:0 0 6px;color:var(--dim);font-weight:600;text-transform:uppercase;letter-spacing:.6px}
.lower{display:grid;grid-template-columns:2fr 1fr;gap:12px}
table{width:100%;border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
th{color:var(--dim);font-weight:600;font-size:12px}
tr.lag td{color:var(--warn)}tr.bad td{color:var(--bad)}
.scroll{max-height:340px;overflow:auto}
#events{font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,monospace;color:var(--dim);margin:0;padding:0;list-style:none}
#events li{padding:2px 0;border-bottom:1px dashed var(--line)}
#conn{margin-left:auto;font-size:12px}
</style></head><body>
<header><h1>slurm-ddp &middot; job <span id="job">&hellip;</span></h1>
<span id="state" class="badge">&hellip;</span><span class="dim" id="gen"></span>
<span id="conn" class="dim">connecting&hellip;</span></header>
<main>
<div id="alert" class="alert"></div>
<div class="cards">
<div class="card" style="grid-column:span 2"><div class="k">Progress</div>
<div class="v" id="progress">&ndash;</div><div class="bar"><div id="bar"></div></div></div>
<div class="card"><div class="k">Loss</div><div class="v" id="loss">&ndash;</div></div>
<div class="card"><div class="k">Samples/s</div><div class="v" id="sps">&ndash;</div></div>
<div class="card"><div class="k">ETA</div><div class="v" id="eta">&ndash;</div></div>
<div class="card"><div class="k">Ranks</div><div class="v" id="ranks">&ndash;</div></div>
</div>
<div class="charts">
<div class="panel"><h2>Loss</h2><canvas id="c-loss"></canvas></div>
<div class="panel"><h2>Throughput (samples/s)</h2><canvas id="c-sps"></canvas></div>
</div>
<div class="lower">
<div class="panel"><h2>Ranks <span class="dim" id="rank-note"></span></h2><div class="scroll">
<table><thead><tr><th>Rank</th><th>Host</th><th>Local</th><th>State</th><th>Epoch</th><th>Step</th>
<th>Loss</th><th>Samples/s</th><th>Last seen</th><th></th></tr></thead>
<tbody id="rank-rows"></tbody></table></div></div>
<div class="panel"><h2>Recent events</h2><ul id="events"></ul></div>
</div>
</main>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const headers = token ? {"Authorization": "Bearer " + token} : {};
const $ = id => document.getElementById(id);
const MAX_ROWS = 200;
function esc(s){return String(s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));}
function fmt(v,d){if(v===null||v===undefined||!isFinite(v))return "\u2013";
  if(Math.abs(v)>=1e6)return (v/1e6).toFixed(2)+"M";if(Math.abs(v)>=1e4)return (v/1e3).toFixed(1)+"k";
  return Number(v).toFixed(d);}
function dur(s){if(s===null||s<0||!isFinite(s))return "\u2013";s=Math.round(s);
  const h=Math.floor(s/3600),m=Math.floor(s%3600/60),x=s%60;
  return h?`${h}h${String(m).padStart(2,"0")}m`:m?`${m}m${String(x).padStart(2,"0")}s`:`${x}s`;}
const TERMINAL = new Set(["done","stopped","failed","lost"]);
function median(xs){if(!xs.length)return 0;const a=xs.slice().sort((p,q)=>p-q);return a[Math.floor((a.length-1)/2)];}
// Same rule as ddpctl: behind the median by more than max(2, 1%), or silent > 2 heartbeats.
function flags(r,med){const f=[];if(TERMINAL.has(r.state))return f;
  if(med-r.step>Math.max(2,Math.floor(med/100)))f.push("behind "+(med-r.step));
  if(r.last_seen_seconds>2.0)f.push("silent "+r.last_seen_seconds.toFixed(1)+"s");return f;}
function render(s){
  $("job").textContent=s.job_id;$("state").textContent=s.state+(s.finished&&s.state==="STOPPING"?" (stopped)":"");
  $("state").className="badge s-"+s.state;$("gen").textContent="generation "+s.generation+" \u00b7 up "+dur(s.uptime_seconds);
  const total=s.epochs*s.steps_per_epoch;const pct=total>0?Math.min(100,100*s.step/total):0;
  $("progress").textContent=s.state==="REGISTERING"?`registering ${s.registered}/${s.world_size}`:
    `epoch ${s.epoch}/${s.epochs} \u00b7 step ${s.step}${total?"/"+total:""}`;
  $("bar").style.width=(s.state==="SUCCEEDED"?100:pct)+"%";
  $("loss").textContent=fmt(s.loss,4);$("sps").textContent=fmt(s.samples_per_second,1);
  $("eta").textContent=dur(s.eta_seconds);
  const live=s.ranks.filter(r=>!TERMINAL.has(r.state)).length;
  $("ranks").textContent=s.state==="REGISTERING"?`${s.registered}/${s.world_size}`:`${live}/${s.world_size}`;
  const al=$("alert");
  if(s.state==="FAILED"){al.style.display="block";
    al.innerHTML="<b>Job failed"+(s.failed_rank!==null?" \u2014 rank "+s.failed_rank:"")+(s.failure?" ("+esc(s.failure.cause)+")":"")+":</b> "+esc(s.failure_reason);}
  else if(s.state==="STOPPING"){al.style.display="block";al.style.borderColor="var(--warn)";al.innerHTML="<b>Stopping:</b> "+esc(s.stop_reason);}
  else if(s.state==="RECOVERING"&&s.lost_ranks&&s.lost_ranks.length){const l=s.lost_ranks[s.lost_ranks.length-1];
    al.style.display="block";al.style.borderColor="var(--warn)";
    al.innerHTML="<b>Recovering"+(l.rank!==null?" \u2014 rank "+l.rank:"")+" ("+esc(l.cause)+"), restart "+s.restarts+" of "+s.max_restarts+":</b> "+esc(l.text);}
  else al.style.display="none";
  if(s.restarts>0)$("gen").textContent+=` \u00b7 restarts ${s.restarts}/${s.max_restarts}`+(s.last_recovery_seconds!==null?` \u00b7 last recovery ${s.last_recovery_seconds.toFixed(1)}s`:"");
  if(s.spare_nodes>0)$("gen").textContent+=` \u00b7 ${s.spare_nodes} spare node(s)`;
  if(s.stall&&s.state!=="FAILED"){al.style.display="block";al.style.borderColor="var(--bad)";
    al.innerHTML="<b>Stalled \u2014 rank "+s.stall.rank+"</b> in "+esc(s.stall.phase)+" for "+fmt(s.stall.seconds,1)+"s (peers: "+esc(Object.entries(s.stall.peers).map(([p,n])=>n+" in "+p).join(", "))+")"+(s.state==="STOPPING"?" \u00b7 stopping: "+esc(s.stop_reason):"");}
  const med=median(s.ranks.filter(r=>!TERMINAL.has(r.state)).map(r=>r.step));
  const rows=s.ranks.map(r=>({r,f:flags(r,med)}));
  const W=x=>x.f.length+(x.r.state==="failed"||x.r.state==="lost"?10:x.r.state==="stalled"?5:0);
  rows.sort((a,b)=>W(b)-W(a)||a.r.rank-b.r.rank);
  const html=[];
  for(const {r,f} of rows.slice(0,MAX_ROWS)){
    const cls=(r.state==="failed"||r.state==="lost"||r.state==="stalled")?"bad":f.length?"lag":"";
    html.push(`<tr class="${cls}" data-rank="${r.rank}"><td>${r.rank}</td><td>${esc(r.host)}</td><td>${r.local_rank}</td><td>${esc(r.state)}</td><td>${r.epoch}</td><td>${r.step}</td><td>${fmt(r.loss,4)}</td><td>${fmt(r.samples_per_second,1)}</td><td>${r.last_seen_seconds.toFixed(1)}s</td><td>${esc(f.join(", "))}</td></tr>`);}
  $("rank-rows").innerHTML=html.join("");
  const lag=rows.filter(x=>x.f.length).length;
  $("rank-note").textContent=(s.ranks.length>MAX_ROWS?`(showing ${MAX_ROWS} of ${s.ranks.length}, flagged first)`:"")+(lag?` \u00b7 ${lag} lagging`:"");
  $("events").innerHTML=s.events.slice(-12).reverse().map(e=>"<li>"+esc(e)+"</li>").join("");}
function chart(id,xs,ys,color){
  const c=$(id),dpr=window.devicePixelRatio||1,w=c.clientWidth,h=c.clientHeight;
  c.width=w*dpr;c.height=h*dpr;const g=c.getContext("2d");g.scale(dpr,dpr);g.clearRect(0,0,w,h);
  const L=52,R=10,T=8,B=22;g.strokeStyle="#2a3542";g.fillStyle="#8a99a8";g.font="11px system-ui";g.lineWidth=1;
  const pts=[];for(let i=0;i<xs.length;i++)if(ys[i]!==null&&isFinite(ys[i]))pts.push([xs[i],ys[i]]);
  if(pts.length<1){g.fillText("waiting for data\u2026",L,h/2);return;}
  let x0=pts[0][0],x1=pts[pts.length-1][0];if(x1<=x0)x1=x0+1;
  let y0=Math.min(...pts.map(p=>p[1])),y1=Math.max(...pts.map(p=>p[1]));if(y1<=y0){y1=y0+1;y0=Math.max(0,y0-1);}
  const pad=(y1-y0)*0.08;y1+=pad;y0=Math.max(y0-pad,Math.min(y0,0)===0&&y0>=0?0:y0-pad);
  const X=x=>L+(x-x0)/(x1-x0)*(w-L-R),Y=y=>T+(1-(y-y0)/(y1-y0))*(h-T-B);
  for(let k=0;k<=4;k++){const y=y0+(y1-y0)*k/4,py=Y(y);g.beginPath();g.moveTo(L,py);g.lineTo(w-R,py);g.stroke();
    g.fillText(fmt(y,y1-y0<10?2:0),4,py+4);}
  g.fillText(dur(x0),L,h-6);g.fillText(dur(x1),w-R-34,h-6);
  g.beginPath();pts.forEach((p,i)=>i?g.lineTo(X(p[0]),Y(p[1])):g.moveTo(X(p[0]),Y(p[1])));
  g.strokeStyle=color;g.lineWidth=2;g.stroke();
  g.lineTo(X(pts[pts.length-1][0]),Y(y0));g.lineTo(X(pts[0][0]),Y(y0));g.closePath();
  g.globalAlpha=0.12;g.fillStyle=color;g.fill();g.globalAlpha=1;}
let history=null;
async function get(path){const r=await fetch(path+(path.includes("?")?"&":"?")+"token="+encodeURIComponent(token),{headers,cache:"no-store"});
  if(!r.ok)throw new Error(path+": HTTP "+r.status);return r.json();}
async function pollStatus(){
  try{const s=await get("/api/status");render(s);$("conn").textContent="updated "+new Date().toLocaleTimeString();
    if(s.finished)$("conn").textContent+=" \u00b7 job finished";}
  catch(e){$("conn").textContent="\u26a0 "+e.message;}
  setTimeout(pollStatus,1000);}
async function pollHistory(){
  try{history=await get("/api/history");chart("c-loss",history.t,history.loss,"#58a6ff");
    chart("c-sps",history.t,history.samples_per_second,"#3fb950");}catch(e){}
  setTimeout(pollHistory,2000);}
window.addEventListener("resize",()=>{if(history){chart("c-loss",history.t,history.loss,"#58a6ff");chart("c-sps",history.t,history.samples_per_second,"#3fb950");}});
pollStatus();pollHistory();
</script></body></html>
)HTML";
}

}  // namespace ddp
