"""Renders bench/compare.sh's results as BENCHMARKS.md: absolute figures and ratios to direct."""
import json
import platform
import os
import subprocess
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
fastmcp = sys.argv[2] if len(sys.argv) > 2 else "?"
direct = {r["tools"]: r["report"] for r in rows if r["system"] == "direct"}


def cpu():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


out = []
out.append("# Benchmarks\n")
out.append(
    "Made by `bench/compare.sh` in one run (release build), on %s, %s cores; FastMCP %s; load\n"
    "average as the run ended, its own processes included: %s (nothing else ran).\n"
    "Each system is driven by `moniker-load` (raw JSON-RPC over stdio or Streamable HTTP; over\n"
    "HTTP the sequential calls use one keep-alive HTTP/1.1 connection with TCP_NODELAY) with\n"
    "the same echo server behind it (`moniker-fixture --echo`). Latencies are sequential\n"
    "`tools/call` round trips after a warm-up; throughput keeps 16 calls in flight. *Added* is\n"
    "the system's p50 (p99) minus direct's in the same run; *ratio* is system / direct. *Gateway\n"
    "RSS* is the peak resident memory of the gateway process alone; *tree RSS* adds its servers.\n"
    "*moniker* is `serve --standalone`; *moniker-shared* is `serve` as a client starts it, attached\n"
    "to the config's shared gateway over a Unix socket: its RSS is the attaching process's alone.\n"
    % (
        cpu(),
        subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or "?",
        fastmcp,
        " ".join("%.2f" % x for x in os.getloadavg()),
    )
)
out.append(
    "| system | tools | servers | call p50 µs | call p99 µs | added p50 / p99 µs | p50 ratio | tools/list ms | start ms | calls/s | gateway RSS MB | tree RSS MB |"
)
out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    rep, d = r["report"], direct.get(r["tools"])
    c = rep["call_us"]
    added = ratio = "—"
    if d and r["system"] != "direct":
        added = "%.0f / %.0f" % (c["p50"] - d["call_us"]["p50"], c["p99"] - d["call_us"]["p99"])
        ratio = "%.2f×" % (c["p50"] / d["call_us"]["p50"])
    out.append(
        "| %s | %d | %d | %.1f | %.1f | %s | %s | %.2f | %.0f | %.0f | %s | %.1f |"
        % (
            r["system"], r["tools"], r["servers"], c["p50"], c["p99"], added, ratio,
            rep["list_ms"]["p50"], rep["startup_ms"], rep["throughput_per_s"],
            "—" if r["system"] == "direct" else "%.1f" % (rep.get("peak_rss_root_kb", 0) / 1024),
            rep["peak_rss_kb"] / 1024,
        )
    )

# moniker's added latency against FastMCP's, per configuration.
pairs = []
for r in rows:
    if r["system"] != "moniker":
        continue
    f = next((x for x in rows if x["system"] == "fastmcp" and x["tools"] == r["tools"] and x["servers"] == r["servers"]), None)
    d = direct.get(r["tools"])
    if f and d:
        m_added = r["report"]["call_us"]["p50"] - d["call_us"]["p50"]
        f_added = f["report"]["call_us"]["p50"] - d["call_us"]["p50"]
        if m_added > 0:
            pairs.append((r["tools"], r["servers"], m_added, f_added, f_added / m_added))
if pairs:
    out.append("\nAdded p50 latency, moniker against FastMCP's proxy (same run):\n")
    out.append("| tools | servers | moniker added µs | FastMCP added µs | FastMCP / moniker |")
    out.append("|---:|---:|---:|---:|---:|")
    for t, s, m, f, x in pairs:
        out.append("| %d | %d | %.0f | %.0f | %.0f× |" % (t, s, m, f, x))
print("\n".join(out))
