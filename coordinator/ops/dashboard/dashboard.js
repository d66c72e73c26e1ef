// The dashboard's script (coordinator/ops/dashboard/index.html): reads the token from the page
// URL (?token=...), polls /api/status every second and /api/history every two, and draws the
// progress, the loss and throughput charts (canvas, own code) and the rank table. It renders the
// status JSON (docs/architecture.md, "Status JSON"); it decides nothing the JSON already says:
// which rank is flagged and why, whether its state is final, the job's exit code.
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
function flagText(r){const f=[];
  if(r.flag==="stalled")f.push("in "+r.phase+" "+fmt(r.phase_seconds,1)+"s");
  if(r.behind_by>0)f.push("behind by "+r.behind_by);
  if(r.flag==="silent")f.push("silent "+fmt(r.last_seen_seconds,1)+"s");
  if(r.flag&&!f.length)f.push(r.flag);return f.join(", ");}
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
  if(s.restarts>0)$("gen").textContent+=` \u00b7 restarts ${s.restarts}/${s.max_restarts}`+(s.last_recovery_seconds!==null?` \u00b7 last recovery ${s.last_recovery_seconds.toFixed(1)}s`:"");
  if(s.spare_nodes>0)$("gen").textContent+=` \u00b7 ${s.spare_nodes} spare node(s)`;
  if(s.stall&&s.state!=="FAILED"){al.style.display="block";al.style.borderColor="var(--bad)";
    al.innerHTML="<b>Stalled \u2014 rank "+s.stall.rank+"</b> in "+esc(s.stall.phase)+" for "+fmt(s.stall.seconds,1)+"s (peers: "+esc(Object.entries(s.stall.peers).map(([p,n])=>n+" in "+p).join(", "))+")"+(s.state==="STOPPING"?" \u00b7 stopping: "+esc(s.stop_reason):"");}
  // Flagged ranks first, then by rank.
  const rows=s.ranks.slice().sort((a,b)=>(b.flag?1:0)-(a.flag?1:0)||a.rank-b.rank);
  const html=[];
  for(const r of rows.slice(0,MAX_ROWS)){
    const cls=[r.flag?"flag-"+r.flag:"",r.final?"final":""].filter(c=>c).join(" ");
    html.push(`<tr class="${esc(cls)}" data-rank="${r.rank}" data-flag="${esc(r.flag||"")}"><td>${r.rank}</td><td>${esc(r.host)}</td><td>${r.local_rank}</td><td>${esc(r.state)}${r.final?" \u2713":""}</td><td>${r.epoch}</td><td>${r.step}</td><td>${fmt(r.loss,4)}</td><td>${fmt(r.samples_per_second,1)}</td><td>${fmt(r.last_seen_seconds,1)}s</td><td class="flag">${esc(flagText(r))}</td></tr>`);}
  $("rank-rows").innerHTML=html.join("");
  const flagged=s.ranks.filter(r=>r.flag).length;
  $("rank-note").textContent=(s.ranks.length>MAX_ROWS?`(showing ${MAX_ROWS} of ${s.ranks.length}, flagged first)`:"")+(flagged?` \u00b7 ${flagged} flagged`:"");
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
