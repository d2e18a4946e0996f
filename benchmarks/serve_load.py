"""The HTTP server under load: ``kerasbert serve`` on the exports ``serve_bench.py --keep FOLDER`` wrote.

For each export served (a ``kerasbert serve`` process of its own, default limits):
- latency at one client: one text of median length, sent again and again; p50 and p99;
- throughput at ``--clients`` concurrent clients, one text a request (HTTP keep-alive, threads in this
  process), against the export called directly by as many threads in a process of its own, one text a call
  (the like-for-like peer; the server batches, the direct calls cannot), and against ``serve_bench.py``'s
  batched throughput of the same export (the model's ceiling);
- the server's peak RSS.
The exports named by ``--load`` (default: the first) also get the load test: ``--load-clients`` clients for
``--load-seconds``; every answer that is not a 429 must be a 200 equal to the answer of that text sent alone:
labels and entities equal, probabilities within 1e-4 (a text's batch mates change the padded length, and with it
the kernels' rounding), or within ``LOW_PRECISION_TOLERANCE`` for an int8 or bf16 export (ONNX Runtime's dynamic
quantization scales activations by the whole batch's range; OpenVINO's fixed scales round such a difference into a
quantization step now and then, and bfloat16's 8-bit mantissa into a visible one).
The server's RSS, sampled every second, must stay flat after warm-up.

Usage:
    python benchmarks/serve_bench.py --keep /tmp/serve          # writes the run and the exports
    python benchmarks/serve_load.py /tmp/serve                  # RESULTS.md, section serve-load
    python benchmarks/serve_load.py /tmp/serve --exports openvino-bf16,openvino-int8-bf16 \
        --load openvino-bf16,openvino-int8-bf16 --section serve-load-precision
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from serve_bench import peak_rss_mb  # noqa: E402

from benchmarks.results import write_section  # noqa: E402

LOW_PRECISION_TOLERANCE = 0.02


class Server:
    """``kerasbert serve EXPORT --port 0`` in a process of its own; its stderr is drained by a thread."""

    def __init__(self, export: str):
        self.process = subprocess.Popen([sys.executable, "-m", "kerasbert", "serve", export, "--port", "0", "--name",
                                         "m"], stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        lines = []
        while " at http" not in (lines or [""])[-1]:
            lines.append(self.process.stderr.readline())
            if not lines[-1]:
                raise RuntimeError("the server ended before serving:\n" + "".join(lines))
        self.url = re.search(r" at (http://\S+)$", lines[-1]).group(1)
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

    def stop(self) -> float:
        """SIGTERM, wait; returns the peak RSS read just before."""
        peak = peak_rss_mb(self.process.pid)
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        return peak


class Client:
    """One keep-alive connection: `ask` posts one text and returns ``(status, answer, seconds)``."""

    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.path, self.connection = parts.path, http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def ask(self, text: str) -> tuple[int, dict, float]:
        start = time.perf_counter()
        self.connection.request("POST", self.path, json.dumps({"instances": [text]}).encode(),
                                {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        body = json.loads(response.read())
        return response.status, body, time.perf_counter() - start


def hammer(url: str, texts: list[str], clients: int, seconds: float) -> list[tuple[int, int, dict, float]]:
    """``clients`` threads posting texts in turn for ``seconds``: ``(text index, status, answer, seconds)`` each."""
    results, deadline = [], time.perf_counter() + seconds

    def client(k: int) -> None:
        connection, i, mine = Client(url), k, []
        while time.perf_counter() < deadline:
            status, body, took = connection.ask(texts[i % len(texts)])
            mine.append((i % len(texts), status, body, took))
            i += clients
        results.extend(mine)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def same_answer(a: dict, b: dict, tolerance: float = 1e-4) -> bool:
    """Equal labels (or entities); probabilities within ``tolerance``."""
    if a.keys() != b.keys() or a.get("label") != b.get("label") or a.get("entities") != b.get("entities"):
        return False
    pa, pb = a.get("probabilities", {}), b.get("probabilities", {})
    return pa.keys() == pb.keys() and all(abs(pa[k] - pb[k]) <= tolerance for k in pa)


def direct(export: str, texts: list[str], threads: int, seconds: float) -> float:
    """Texts a second when ``threads`` threads call the export directly, one text a call, in a new process."""
    code = ("import json, sys, threading, time\nfrom kerasbert.serving.exported import open_export\n"
            "served = open_export(sys.argv[1]); texts = json.loads(sys.argv[2]); n = int(sys.argv[3])\n"
            "served.predict([{'text': texts[0]}]); done = []; end = time.perf_counter() + float(sys.argv[4])\n"
            "def run(k):\n    i = k\n    while time.perf_counter() < end:\n"
            "        served.predict([{'text': texts[i % len(texts)]}]); done.append(1); i += n\n"
            "ts = [threading.Thread(target=run, args=(k,)) for k in range(n)]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]; print(len(done) / float(sys.argv[4]))\n")
    out = subprocess.run([sys.executable, "-c", code, export, json.dumps(texts), str(threads), str(seconds)],
                         capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=True)
    return float(out.stdout.split()[-1])


def load_test(server: Server, texts: list[str], clients: int, seconds: float, tolerance: float) -> dict:
    """The load test's figures: answers checked against single requests, RSS sampled each second."""
    alone = [Client(server.url).ask(text)[1]["predictions"][0] for text in texts]
    samples, stop = [], threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            samples.append(server.rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results = hammer(server.url, texts, clients, seconds)
    stop.set()
    sampler.join()
    statuses = [status for _, status, _, _ in results]
    wrong = sum(1 for i, status, body, _ in results if status == 200 and not same_answer(body["predictions"][0],
                                                                                            alone[i], tolerance))
    quarter = max(1, len(samples) // 4)
    after_warmup, last = statistics.median(samples[:quarter]), statistics.median(samples[-quarter:])
    return {"requests": len(results), "ok": statuses.count(200), "refused": statuses.count(429),
            "failed": len(statuses) - statuses.count(200) - statuses.count(429), "wrong": wrong,
            "rss_first_mb": after_warmup, "rss_last_mb": last, "growth": last / after_warmup - 1,
            "tolerance": tolerance}


def measure(export: str, texts: list[str], args, load: bool) -> dict:
    """Latency, throughput, the direct peer and peak RSS of one export (and the load test when ``load``)."""
    server, figures = Server(export), {}
    try:
        median_text = sorted(texts, key=len)[len(texts) // 2]
        client = Client(server.url)
        for _ in range(5):
            client.ask(median_text)
        latencies = sorted(client.ask(median_text)[2] for _ in range(args.latency_requests))
        results = hammer(server.url, texts, args.clients, args.seconds)
        figures.update({"p50_ms": 1000 * latencies[len(latencies) // 2],
                   "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
                   "served_per_s": sum(1 for r in results if r[1] == 200) / args.seconds,
                   "errors": sum(1 for r in results if r[1] != 200)})
        if load:
            figures["load"] = load_test(server, texts, args.load_clients, args.load_seconds, tolerance(export))
    finally:
        figures["rss_mb"] = server.stop()
    figures["direct_per_s"] = direct(export, texts, args.clients, args.seconds)
    return figures


def tolerance(export: str) -> float:
    """How far an answer's probabilities may move with its batch mates: `LOW_PRECISION_TOLERANCE` for an int8 or
    bf16 export (as its ``kerasbert-export.json`` records), else 1e-4."""
    with open(os.path.join(export, "kerasbert-export.json"), encoding="utf-8") as f:
        info = json.load(f)
    return LOW_PRECISION_TOLERANCE if info.get("int8") or info.get("precision", "f32") != "f32" else 1e-4


def report(figures: dict, offline: dict, args) -> str:
    rows = [f"| export | p50 / p99 at 1 client | served at {args.clients} clients | direct, {args.clients} threads "
            "| served / direct | served / batched offline | server peak RSS |", "|---|---|---|---|---|---|---|"]
    for name, f in figures.items():
        batched = offline.get(name, {}).get("per_s")
        rows.append(f"| {name} | {f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms | {f['served_per_s']:.1f}/s "
                    f"({f['errors']} errors) | {f['direct_per_s']:.1f}/s | "
                    f"{f['served_per_s'] / f['direct_per_s']:.2f} | "
                    + (f"{f['served_per_s'] / batched:.2f}" if batched else "—") + f" | {f['rss_mb'] / 1024:.2f} GB |")
    lines = ["", *rows, ""]
    for name, f in figures.items():
        lines.append(f"- {name}: served ≥ 85 % of direct at {args.clients} clients: "
                     f"**{'met' if f['served_per_s'] >= 0.85 * f['direct_per_s'] else 'missed'}** "
                     f"({f['served_per_s'] / f['direct_per_s']:.2f} ×); p99 ≤ 1.5 × p50 at one client: "
                     f"**{'met' if f['p99_ms'] <= 1.5 * f['p50_ms'] else 'missed'}** "
                     f"({f['p99_ms'] / f['p50_ms']:.2f} ×)")
    int8 = [name for name in figures if name.endswith("-int8")]
    if int8 and "saved_model" in figures:
        ratio = figures[int8[0]]["rss_mb"] / figures["saved_model"]["rss_mb"]
        lines.append(f"- peak RSS of the server with {int8[0]} ≤ 0.5 × with the float32 SavedModel: "
                     f"**{'met' if ratio <= 0.5 else 'missed'}** ({ratio:.2f} ×)")
    for name, f in figures.items():
        if "load" in f:
            load = f["load"]
            ok = load["failed"] == 0 and load["wrong"] == 0 and load["growth"] <= 0.05
            lines.append(f"- load test on {name}, {args.load_clients} clients for {args.load_seconds:g} s: "
                         f"**{'passed' if ok else 'failed'}**: {load['requests']} requests, {load['ok']} answered, "
                         f"{load['refused']} refused (429), {load['failed']} failed, {load['wrong']} answers unlike "
                         f"the text's answer alone (labels, probabilities within {load['tolerance']:g}); RSS "
                         f"{load['rss_first_mb']:.0f} MB after warm-up, "
                         f"{load['rss_last_mb']:.0f} MB at the end ({100 * load['growth']:+.1f} %)")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the --keep folder of serve_bench.py")
    parser.add_argument("--exports", default="openvino-int8,openvino,onnx-int8,saved_model",
                        help="the exports to serve (default: %(default)s)")
    parser.add_argument("--load", help="comma-separated: the exports also load-tested (default: the first)")
    parser.add_argument("--section", default="serve-load", help="the RESULTS.md section (default: %(default)s)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0, help="each throughput measurement")
    parser.add_argument("--latency-requests", type=int, default=200)
    parser.add_argument("--load-clients", type=int, default=64)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="4 clients, 0.5 s each, 10 latency requests, a 2 s load")
    parser.add_argument("--results", default=None, help="the markdown file to write (default RESULTS.md)")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.seconds, args.latency_requests, args.load_clients, args.load_seconds = 4, 0.5, 10, 8, 2.0
    with open(os.path.join(args.folder, "serve_bench.json")) as f:
        bench = json.load(f)
    with open(bench["job"]) as f:
        job = json.load(f)
    names = [name for name in args.exports.split(",") if name in job["exports"]]
    loaded = args.load.split(",") if args.load else names[:1]
    figures = {name: measure(job["exports"][name], job["texts"], args, load=name in loaded) for name in names}
    text = "## Serving over HTTP" + (" (quick)" if args.quick else "") + "\n\n" + \
        f"`kerasbert serve` with its default limits, on the exports of the serve_bench run above; {os.cpu_count()} " \
        "cores shared by the server and the clients.\n" + report(figures, bench["figures"], args)
    write_section(args.section + "-quick" if args.quick else args.section, text,
                  **({"path": args.results} if args.results else {}))
    print(text)


if __name__ == "__main__":
    main()
