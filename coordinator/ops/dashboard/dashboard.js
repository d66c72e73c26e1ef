// The dashboard's script (coordinator/ops/dashboard/index.html): reads the token from the page
// URL (?token=...), polls /api/status every second and /api/history every two, and draws the
// progress, the loss and throughput charts (canvas, own code), where the wall time went (ETTR,
// a stacked bar per history sample and a legend of each use's share), the step breakdown, the
// stragglers and the rank table. It renders the status JSON (docs/architecture.md, "Status
// JSON"); it decides nothing the JSON already says: which rank is flagged and why, which ranks
// are stragglers and their cause, whether a state is final, the job's exit code.
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
// What the rank's flag says (the coordinator decides flag, behind_by and final; the page only
// shows them): the same words as ddpctl status.
// A straggler's row names its cause from the status's `stragglers` entry.
function flagText(r,s){const f=[];
  if(r.flag==="stalled")f.push("in "+r.phase+" "+fmt(r.phase_seconds,1)+"s");
  if(r.behind_by>0)f.push("behind by "+r.behind_by);
  if(r.flag==="silent")f.push("silent "+fmt(r.last_seen_seconds,1)+"s");
  if(r.flag==="straggler"){const st=(s.stragglers||[]).find(x=>x.rank===r.rank);
    f.push(st?"straggler: "+stragglerReason(st,false):"straggler (score "+fmt(r.score&&r.score.relative,2)+")");}
  if(r.flag&&!f.length)f.push(r.flag);return f.join(", ");}
// Why a rank is a straggler, in ddpctl status's words (StragglerReason, common/job_status.h):
// "compute 1.9x slower than the best rank for 42 s (relative score 0.52)".
function stragglerReason(st,score){
  return st.section+" "+(st.slower>0?Number(st.slower).toFixed(1)+"x slower":"slower")+
    " than the best rank for "+Number(st.seconds||0).toFixed(0)+" s"+
    (score?" (relative score "+Number(st.relative_score).toFixed(2)+")":"");}
// Where the wall time goes (status `time_use`, history `time_use`) and a step's sections (status
// `breakdown`), in the JSON's words, with their colours.
const USES=[["training","#3fb950"],["startup","#bc8cff"],["recoveries","#d29922"],["stalls","#f85149"],
  ["checkpoints","#58a6ff"],["evaluation","#39c5cf"],["other","#8a99a8"]];
const SECTIONS=[["data","#bc8cff"],["compute","#58a6ff"],["communication","#d29922"],["optimizer","#3fb950"]];
function pct(part,whole){return whole>0?(100*(part||0)/whole).toFixed(1)+"%":"\u2013";}
function renderTime(s){const t=s.time_use,has=!!(t&&t.wall>0);
  $("ettr").textContent=s.ettr!==null&&s.ettr!==undefined&&isFinite(s.ettr)?(100*s.ettr).toFixed(1)+"%":"\u2013";
  $("ettr-of").textContent=has?"of "+dur(t.wall)+" wall time":"";
  $("time-note").textContent=has?"("+dur(t.wall)+")":"";
  $("time-legend").innerHTML=has?USES.map(([u,c])=>`<li data-use="${u}"><i style="background:${c}"></i>${u} ${pct(t[u],t.wall)} \u00b7 ${dur(t[u]||0)}</li>`).join(""):
    '<li class="dim">no time accounted yet</li>';}
function renderBreakdown(s){const b=s.breakdown;
  if(!b){$("breakdown").innerHTML="";$("breakdown-note").textContent="";
    $("breakdown-legend").innerHTML='<li class="dim">not measured yet</li>';return;}
  const total=b.step_seconds>0?b.step_seconds:SECTIONS.reduce((a,[k])=>a+(b[k]||0),0);
  $("breakdown-note").textContent="step "+fmt(total,3)+"s (slowest rank "+b.rank+")";
  $("breakdown").innerHTML=SECTIONS.map(([k,c])=>{const p=total>0?100*(b[k]||0)/total:0;
    return `<div data-section="${k}" style="width:${p.toFixed(2)}%;background:${c}" title="${k} ${pct(b[k],total)}">${p>=12?k+" "+p.toFixed(0)+"%":""}</div>`;}).join("");
  $("breakdown-legend").innerHTML=SECTIONS.map(([k,c])=>`<li data-section="${k}"><i style="background:${c}"></i>${k} ${fmt(b[k],3)}s (${pct(b[k],total)})`+
    (b.spread?` \u00b7 spread ${fmt(b.spread[k],3)}s`:"")+"</li>").join("");}
function renderStragglers(s){const sg=s.stragglers||[],bn=$("stragglers");
  bn.style.display=sg.length?"block":"none";
  bn.innerHTML=sg.map(st=>`<div data-rank="${st.rank}"><b>STRAGGLER: rank ${st.rank}</b> (host ${esc(st.host)}): ${esc(stragglerReason(st,true))}</div>`).join("");}
// The coordinator and its standby (status `coordinator`), in ddpctl status's words (set as
// textContent: the hosts need no escaping).
function coordText(c){if(!c)return "";const sb=c.standby;
  return "coordinator epoch "+c.epoch+" on "+(c.host||"?")+" (node "+c.node+")"+
    (c.takeovers>0?" \u00b7 "+c.takeovers+" takeover"+(c.takeovers===1?"":"s"):"")+
    (sb?" \u00b7 standby node "+sb.node+" ("+(sb.host||"?")+"), "+sb.behind_records+" records behind":" \u00b7 no standby");}
function render(s){
  $("job").textContent=s.job_id;$("state").textContent=s.state+(s.finished&&s.state==="STOPPING"?" (stopped)":"");
  $("state").className="badge s-"+s.state;$("gen").textContent="generation "+s.generation+" \u00b7 up "+dur(s.uptime_seconds)+
    (s.exit_code!==null&&s.exit_code!==undefined?" \u00b7 exit code "+s.exit_code:"");
  const total=s.epochs*s.steps_per_epoch;const pct=total>0?Math.min(100,100*s.step/total):0;
  $("progress").textContent=s.state==="REGISTERING"?`registering ${s.registered}/${s.world_size}`:
    `epoch ${s.epoch}/${s.epochs} \u00b7 step ${s.step}${total?"/"+total:""}`;
  $("bar").style.width=(s.state==="SUCCEEDED"?100:pct)+"%";
  $("loss").textContent=fmt(s.loss,4);$("sps").textContent=fmt(s.samples_per_second,1);
  $("eta").textContent=dur(s.eta_seconds);
  const live=s.ranks.filter(r=>!r.final).length;
  $("ranks").textContent=s.state==="REGISTERING"?`${s.registered}/${s.world_size}`:`${live}/${s.world_size}`;
  const al=$("alert");
  if(s.state==="FAILED"){al.style.display="block";
    al.innerHTML="<b>Job failed"+(s.failed_rank!==null?" \u2014 rank "+s.failed_rank:"")+(s.failure?" ("+esc(s.failure.cause)+")":"")+":</b> "+esc(s.failure_reason);}
  else if(s.state==="STOPPING"){al.style.display="block";al.style.borderColor="var(--warn)";al.innerHTML="<b>Stopping:</b> "+esc(s.stop_reason);}
  else if(s.state==="RECOVERING"&&s.lost_ranks&&s.lost_ranks.length){const l=s.lost_ranks[s.lost_ranks.length-1];
    al.style.display="block";al.style.borderColor="var(--warn)";
    al.innerHTML="<b>Recovering"+(l.rank!==null?" \u2014 rank "+l.rank:"")+" ("+esc(l.cause)+"), restart "+s.restarts+" of "+s.max_restarts+":</b> "+esc(l.text);}
  else al.style.display="none";
  renderStragglers(s);renderTime(s);renderBreakdown(s);
  if(s.restarts>0)$("gen").textContent+=` \u00b7 restarts ${s.restarts}/${s.max_restarts}`+(s.last_recovery_seconds!==null?` \u00b7 last recovery ${s.last_recovery_seconds.toFixed(1)}s`:"");
  if(s.spare_nodes>0)$("gen").textContent+=` \u00b7 ${s.spare_nodes} spare node(s)`;
  $("coord").textContent=coordText(s.coordinator);
  if(s.stall&&s.state!=="FAILED"){al.style.display="block";al.style.borderColor="var(--bad)";
    al.innerHTML="<b>Stalled \u2014 rank "+s.stall.rank+"</b> in "+esc(s.stall.phase)+" for "+fmt(s.stall.seconds,1)+"s (peers: "+esc(Object.entries(s.stall.peers).map(([p,n])=>n+" in "+p).join(", "))+")"+(s.state==="STOPPING"?" \u00b7 stopping: "+esc(s.stop_reason):"");}
  // Flagged ranks first, then by rank.
  const rows=s.ranks.slice().sort((a,b)=>(b.flag?1:0)-(a.flag?1:0)||a.rank-b.rank);
  const html=[];
  for(const r of rows.slice(0,MAX_ROWS)){
    const cls=[r.flag?"flag-"+r.flag:"",r.final?"final":""].filter(c=>c).join(" ");
    html.push(`<tr class="${esc(cls)}" data-rank="${r.rank}" data-flag="${esc(r.flag||"")}"><td>${r.rank}</td><td>${esc(r.host)}</td><td>${r.local_rank}</td><td>${esc(r.state)}${r.final?" \u2713":""}</td><td>${r.epoch}</td><td>${r.step}</td><td>${fmt(r.loss,4)}</td><td>${fmt(r.samples_per_second,1)}</td><td>${fmt(r.last_seen_seconds,1)}s</td><td class="score">${r.score?fmt(r.score.relative,2):"\u2013"}</td><td class="flag">${esc(flagText(r,s))}</td></tr>`);}
  $("rank-rows").innerHTML=html.join("");
  const flagged=s.ranks.filter(r=>r.flag).length;
  $("rank-note").textContent=(s.ranks.length>MAX_ROWS?`(showing ${MAX_ROWS} of ${s.ranks.length}, flagged first)`:"")+(flagged?` \u00b7 ${flagged} flagged`:"");
  $("events").innerHTML=s.events.slice(-12).reverse().map(e=>"<li>"+esc(e)+"</li>").join("");}
// A cleared canvas at the device's resolution, with the axes' pen: [context, width, height].
function canvasOf(id){const c=$(id),dpr=window.devicePixelRatio||1,w=c.clientWidth,h=c.clientHeight;
  c.width=w*dpr;c.height=h*dpr;const g=c.getContext("2d");g.scale(dpr,dpr);g.clearRect(0,0,w,h);
  g.strokeStyle="#2a3542";g.fillStyle="#8a99a8";g.font="11px system-ui";g.lineWidth=1;return [g,w,h];}
function chart(id,xs,ys,color){
  const [g,w,h]=canvasOf(id),L=52,R=10,T=8,B=22;
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
// Where the wall time went, over time: one bar per history sample, as wide as the wall time since
// the previous sample, stacked by what that time went to (the differences of the cumulative
// time use), 0 to 100%.
function timeChart(id,tu){
  const [g,w,h]=canvasOf(id),L=52,R=10,T=8,B=22,wall=(tu&&tu.wall)||[];
  const end=wall.length?wall[wall.length-1]:0;
  if(!(end>0)){g.fillText("waiting for data\u2026",L,h/2);return;}
  const X=x=>L+x/end*(w-L-R),Y=f=>T+(1-f)*(h-T-B);
  for(let k=0;k<=4;k++){const py=Y(k/4);g.beginPath();g.moveTo(L,py);g.lineTo(w-R,py);g.stroke();
    g.fillText(25*k+"%",4,py+4);}
  g.fillText("0s",L,h-6);g.fillText(dur(end),w-R-34,h-6);
  for(let i=0;i<wall.length;i++){const w0=i?wall[i-1]:0,dw=wall[i]-w0;if(!(dw>0))continue;
    const xa=X(w0),xb=X(wall[i]),bw=Math.max(1,xb-xa-(xb-xa>4?1:0));let acc=0;
    for(const [use,color] of USES){const a=tu[use]||[],d=(a[i]||0)-(i?a[i-1]||0:0);if(!(d>0))continue;
      const f=Math.min(d/dw,1-acc);g.fillStyle=color;g.fillRect(xa,Y(acc+f),bw,Y(acc)-Y(acc+f));acc+=f;}}}
function drawHistory(){chart("c-loss",history.t,history.loss,"#58a6ff");
  chart("c-sps",history.t,history.samples_per_second,"#3fb950");timeChart("c-time",history.time_use);}
let history=null;
async function get(path){const r=await fetch(path+(path.includes("?")?"&":"?")+"token="+encodeURIComponent(token),{headers,cache:"no-store"});
  if(!r.ok)throw new Error(path+": HTTP "+r.status);return r.json();}
async function pollStatus(){
  try{const s=await get("/api/status");render(s);$("conn").textContent="updated "+new Date().toLocaleTimeString();
    if(s.finished)$("conn").textContent+=" \u00b7 job finished";}
  catch(e){$("conn").textContent="\u26a0 "+e.message;}
  setTimeout(pollStatus,1000);}
async function pollHistory(){
  try{history=await get("/api/history");drawHistory();}catch(e){}
  setTimeout(pollHistory,2000);}
window.addEventListener("resize",()=>{if(history)drawHistory();});
pollStatus();pollHistory();
