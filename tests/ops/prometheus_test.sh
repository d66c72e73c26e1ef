#!/usr/bin/env bash
# A real Prometheus server scrapes the coordinator's /metrics with the job's bearer token; the
# test asks Prometheus's HTTP API for ddp_step until the job's step shows up (60 s deadline).
source "$(dirname "$0")/lib.sh"
prom="$(command -v prometheus || true)"
[[ -n "$prom" ]] || { echo "SKIP: prometheus not installed"; exit 77; }
start_coordinator prom 4
start_workers prom 4 --steps-per-second 10 --epochs 100
wait_running
http_port="$(dist_value http_port)"
token="$(dist_value view_token)"
prom_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$work/prom-data"
cat >"$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: slurm-ddp
    scrape_interval: 1s
    authorization:
      type: Bearer
      credentials: $token
    static_configs:
      - targets: ["127.0.0.1:$http_port"]
YML
"$prom" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom-data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")
deadline=$(($(date +%s) + 60))
step=""
while (($(date +%s) < deadline)); do
  answer="$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=ddp_step" || true)"
  step="$(python3 -c '
import json, sys
try:
    r = json.loads(sys.argv[1])["data"]["result"]
    print(r[0]["value"][1] if r and float(r[0]["value"][1]) > 0 else "")
except Exception:
    print("")' "$answer")"
  [[ -n "$step" ]] && break
  sleep 1
done
[[ -n "$step" ]] || fail "Prometheus never saw ddp_step > 0; last answer: $answer; log: $(tail -5 "$work/prometheus.log")"
up="$(curl -s "http://127.0.0.1:$prom_port/api/v1/query?query=up" )"
grep -q '"value":\[[0-9.]*,"1"\]' <<<"$up" || fail "target not up: $up"
job_step="$("$bin/ddpctl" --dist-file "$df" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])')"
((job_step >= ${step%.*})) || fail "Prometheus step $step ahead of the job's $job_step?"
pass "Prometheus scraped ddp_step=$step with the bearer token (job now at $job_step)"
kill "$prom_pid"
wait "$prom_pid" 2>/dev/null || true
echo PASS
