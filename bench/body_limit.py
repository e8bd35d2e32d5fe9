"""A 600 MiB POST to the ingest endpoint of a live server: without a token, with a bad one,
and with a writer token (declared length, then chunked). Measures the answer, how long it
took, how much of the body the client got to send and the server's peak RSS over idle.
Target (issue 13, item 1): refused before it is read, memory below idle + 100 MiB.

    python bench/body_limit.py
"""

from __future__ import annotations

import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import machine, migrate_and_token, start_api  # noqa: E402

MIB = 1024 * 1024
TOTAL = 600 * MIB


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def upload(port: int, run_id: int, auth: str | None, chunked: bool) -> tuple[str, float, int]:
    """Send up to 600 MiB of zeros; returns (status line, seconds to it, bytes sent)."""
    head = [f"POST /api/v1/runs/{run_id}/ingest HTTP/1.1", f"Host: 127.0.0.1:{port}",
            "Content-Type: application/json"]  # fmt: skip
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {TOTAL}")
    if auth:
        head.append(f"Authorization: {auth}")
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    chunk = b"\0" * MIB
    if chunked:
        chunk = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent, began, answer = 0, time.perf_counter(), b""
    sock.setblocking(False)
    try:
        while sent < TOTAL and not answer:
            try:
                answer = sock.recv(4096)
                break
            except BlockingIOError:
                pass
            try:
                sock.setblocking(True)
                sock.settimeout(5)
                sock.sendall(chunk)
                sent += MIB
            except OSError:  # the server answered and closed: stop sending
                break
            finally:
                sock.setblocking(False)
        if not answer:
            sock.setblocking(True)
            sock.settimeout(60)
            answer = sock.recv(4096)
    except OSError:
        pass
    finally:
        sock.close()
    status = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "(connection closed)"
    return status, time.perf_counter() - began, sent


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        db_url = f"sqlite:///{tmp}/b.db"
        token = migrate_and_token(db_url)
        proc, base = start_api(db_url, Path(tmp), workers=1)
        try:
            import httpx

            run = httpx.post(base + "/api/v1/runs", json={"project": "p", "name": "r"},
                             headers={"Authorization": f"Bearer {token}"}).json()  # fmt: skip
            port = int(base.rsplit(":", 1)[1])
            pid = proc.process.pid
            print(f"machine: {machine()}")
            ok = True
            for label, auth, chunked in (
                ("no token", None, False),
                ("invalid token", "Bearer gs_invalid", False),
                ("no token, chunked", None, True),
                ("writer token, Content-Length 600 MiB", f"Bearer {token}", False),
                ("writer token, chunked 600 MiB", f"Bearer {token}", True),
            ):
                time.sleep(1.0)
                idle = rss_mib(pid)
                peak = [idle]
                done = threading.Event()

                def sample(peak=peak, done=done) -> None:
                    while not done.is_set():
                        peak[0] = max(peak[0], rss_mib(pid))
                        time.sleep(0.01)

                sampler = threading.Thread(target=sample)
                sampler.start()
                status, seconds, sent = upload(port, run["id"], auth, chunked)
                time.sleep(0.3)
                done.set()
                sampler.join()
                grew = peak[0] - idle
                print(f"{label:40s} {status:32s} {seconds * 1000:7.0f} ms  client sent "
                      f"{sent / MIB:5.0f} MiB  server RSS idle {idle:5.0f} MiB, "
                      f"peak +{grew:4.0f} MiB")  # fmt: skip
                ok = ok and grew < 100 and not status.endswith("200 OK")
        finally:
            proc.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
