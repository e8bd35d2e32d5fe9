"""The Dash shell: navbar, ``dash.page_container`` and the shared stores.

Pages register themselves (``dash.register_page``) when imported below, after the ``Dash``
object exists, and use the global ``@callback`` so they never import this module.
"""

from __future__ import annotations

from pathlib import Path

import dash
import dash_bootstrap_components as dbc
from dash import dcc, html

from grposcope_dashboard import api_client, auth
from grposcope_dashboard.components.navbar import navbar

ASSETS = Path(__file__).with_name("assets")


def create_dash(api_url: str, *, server: bool | object = True) -> dash.Dash:
    """Build the dashboard reading the API at ``api_url`` (``http://HOST:PORT``)."""
    api_client.configure(api_url)
    app = dash.Dash(
        __name__,
        server=server,
        use_pages=True,
        pages_folder="",
        assets_folder=str(ASSETS),
        # Bootstrap 5.3 is vendored in assets/ (00-bootstrap.min.css): no CDN is reachable
        # from many clusters, and the dashboard must look right offline.
        suppress_callback_exceptions=True,
        title="grposcope",
        update_title=None,  # no "Updating…" flicker in the tab title on every live tick
    )
    _import_pages()
    app.layout = shell
    auth.install(app.server)
    return app


def _import_pages() -> None:
    # Imported for their register_page and @callback side effects, in navbar order.
    from grposcope_dashboard.pages import (  # noqa: F401
        alerts,
        compare,
        login,
        run,
        runs,
        settings,
    )


def shell() -> html.Div:
    """Evaluated per page load, inside the browser's request: reads who is logged in."""
    me = _me()
    return html.Div(
        [
            dcc.Store(id="me-store", data=me),
            navbar(me),
            dbc.Container(dash.page_container, fluid=True, className="page"),
        ]
    )


def _me() -> dict | None:
    token = api_client.request_token()
    if not token:
        return None
    try:
        return api_client.client(token).me()
    except api_client.ApiError:
        return None
