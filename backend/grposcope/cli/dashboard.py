"""`grposcope dashboard`: the dashboard alone, reading a grposcope API elsewhere (compose).

`serve` already mounts the dashboard at / beside the API; this command is for deployments
that run the dashboard as its own service, pointing it at the API's URL.
"""

from __future__ import annotations

import argparse

from grposcope.cli.common import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dashboard", help="run the web dashboard against a grposcope API")
    p.add_argument("--api-url", required=True,
                   help="base URL of the grposcope server, e.g. http://api:8000 (a trailing "
                        "/api/v1 and a missing http:// are accepted)")  # fmt: skip
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8050, help="port (8050)")
    p.add_argument("--threads", type=int, default=16, help="worker threads (16)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from grposcope_trainer.config import server_base  # the one URL normaliser

    try:
        api_url = server_base(args.api_url)
    except ValueError as exc:
        raise CliError(f"--api-url: {exc}") from None
    if not 0 < args.port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {args.port}")
    import uvicorn
    from a2wsgi import WSGIMiddleware

    from grposcope_dashboard.app import create_dash

    dash_app = create_dash(api_url)
    print(f"grposcope dashboard on http://{args.host}:{args.port}/ reading {api_url}",
          flush=True)  # fmt: skip
    app = WSGIMiddleware(dash_app.server, workers=args.threads)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
