"""docker-compose.yml checked against the code, without a Docker engine: every command is a
real `grposcope` sub-command with valid flags, every GRPOSCOPE_* variable is one the code
reads, ports and service names line up, builds exist, and start-up order is well founded."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
GRPOSCOPE_SERVICES = ("migrate", "api", "worker", "maintain", "dashboard")


@pytest.fixture(scope="module")
def compose() -> dict:
    # PyYAML's safe loader resolves the `<<: *anchor` merge keys the file uses, as Compose does.
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


def parse_command(command: list[str]):  # type: ignore[no-untyped-def]
    """Parse a service command with the real CLI parser (exits non-zero on unknown flags)."""
    from grposcope.cli.main import build_parser

    assert command[0] == "grposcope", command
    return build_parser().parse_args(command[1:])


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def env_names_read_by_code() -> set[str]:
    """GRPOSCOPE_* names the server reads (Settings fields) and the trainer plugin reads."""
    from grposcope.config import Settings

    names = {f"GRPOSCOPE_{field.upper()}" for field in Settings.model_fields}
    plugin = REPO / "trainer_plugin" / "grposcope_trainer"
    for path in plugin.glob("*.py"):
        names |= set(re.findall(r"\bGRPOSCOPE_[A-Z_]+\b", path.read_text()))
    return names


def test_the_team_services_are_all_there(services: dict) -> None:
    assert {"db", *GRPOSCOPE_SERVICES} <= services.keys()
    assert services["db"]["image"].startswith("postgres:16")


@pytest.mark.parametrize("name", GRPOSCOPE_SERVICES)
def test_each_command_is_a_grposcope_subcommand_with_valid_flags(services: dict, name: str):
    args = parse_command(services[name]["command"])
    assert args.command == name if name != "api" else args.command == "serve"
    assert callable(args.handler)


def test_api_runs_several_workers_and_leaves_migrations_fits_and_dashboard_to_others(
    services: dict,
) -> None:
    args = parse_command(services["api"]["command"])
    assert args.workers >= 2
    assert (args.no_migrate, args.no_worker, args.no_dashboard) == (True, True, True)
    assert args.host == "0.0.0.0"


def test_every_grposcope_variable_is_one_the_code_reads(services: dict) -> None:
    known = env_names_read_by_code()
    assert "GRPOSCOPE_DATABASE_URL" in known  # the reader itself works
    used = {var for svc in services.values() for var in (svc.get("environment") or {})
            if var.startswith("GRPOSCOPE_")}  # fmt: skip
    assert used, "the grposcope services set no GRPOSCOPE_* variable"
    assert used <= known, f"not read by any code: {sorted(used - known)}"


def test_database_url_points_at_the_db_service_with_its_credentials(services: dict) -> None:
    db_env = services["db"]["environment"]
    for name in ("migrate", "api", "worker", "maintain"):
        url = services[name]["environment"]["GRPOSCOPE_DATABASE_URL"]
        assert url.startswith("postgresql+psycopg://"), url
        parsed = urlparse(url.replace("${POSTGRES_PASSWORD:-grposcope}", "secret"))
        assert parsed.hostname == "db" and parsed.port == 5432
        assert parsed.username == db_env["POSTGRES_USER"]
        assert parsed.path.lstrip("/") == db_env["POSTGRES_DB"]
    assert "POSTGRES_PASSWORD" in services["migrate"]["environment"]["GRPOSCOPE_DATABASE_URL"]


def test_ports_line_up(services: dict) -> None:
    api_port = parse_command(services["api"]["command"]).port
    api_url = urlparse(flag(services["dashboard"]["command"], "--api-url"))
    assert api_url.hostname == "api" and api_url.hostname in services
    assert api_url.port == api_port
    dash_port = parse_command(services["dashboard"]["command"]).port
    for name, port in (("api", api_port), ("dashboard", dash_port)):
        targets = {int(str(p).rsplit(":", 1)[1]) for p in services[name]["ports"]}
        assert targets == {port}, f"{name} publishes {targets}, listens on {port}"
        assert f":{port}/" in " ".join(services[name]["healthcheck"]["test"])


def test_workers_can_be_scaled(services: dict) -> None:
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker
    assert parse_command(worker["command"]).command == "worker"


def test_builds_exist_and_share_one_image(services: dict) -> None:
    images = set()
    for name in GRPOSCOPE_SERVICES:
        build = services[name]["build"]
        context = REPO / build["context"]
        assert context.is_dir()
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), dockerfile
        images.add(services[name]["image"])
    assert len(images) == 1
    text = (REPO / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11-slim" in text
    installs = re.findall(r"pip install [^&\n]+", text)
    # The server image has no torch at all (the demo extra's), and installs the wheels, not
    # an editable tree: the migrations are package data.
    assert installs and not any("torch" in line or " -e " in f"{line} " for line in installs)
    assert any("./trainer_plugin ." in line for line in installs), installs
    for copied in re.findall(r"^COPY (\S+) ", text, flags=re.MULTILINE):
        assert (REPO / copied).exists(), f"Dockerfile copies missing {copied}"


def test_start_order_waits_on_real_health_checks(services: dict) -> None:
    seen = 0
    for name, svc in services.items():
        for target, spec in (svc.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert services[target].get("healthcheck", {}).get("test"), (name, target)
            elif condition == "service_completed_successfully":
                assert services[target].get("restart") == "no", (name, target)
            else:
                assert condition == "service_started", condition
            seen += 1
    assert seen >= 5
    assert services["api"]["depends_on"]["migrate"]["condition"] == (
        "service_completed_successfully"
    )
    assert parse_command(services["migrate"]["command"]).command == "migrate"


def test_variables_the_file_interpolates_are_documented() -> None:
    doc = (REPO / "docs" / "deployment.md").read_text()
    interpolated = set(re.findall(r"\$\{([A-Z_]+)", COMPOSE.read_text()))
    assert interpolated
    assert not {v for v in interpolated if v not in doc}, "document every variable"


def _default(value: str) -> str:
    """The default of a `${VAR:-default}` interpolation."""
    match = re.fullmatch(r"\$\{[A-Z_]+:-([^}]*)\}", value)
    assert match, value
    return match.group(1)


def test_services_that_build_webhook_links_point_them_at_the_dashboard(services: dict) -> None:
    """Webhook payloads link to the run's page on the dashboard. Here the API serves no
    dashboard (--no-dashboard), so the services that build links (every fit worker: the
    `worker` service, and `serve` if it ran one) must get GRPOSCOPE_DASHBOARD_URL, by default
    the host port the dashboard is published on, not the API's."""
    builders = []
    for name in GRPOSCOPE_SERVICES:
        args = parse_command(services[name]["command"])
        if args.command == "worker" or (args.command == "serve" and not args.no_worker):
            builders.append(name)
    assert "worker" in builders
    dash_ports = {str(p).rsplit(":", 1)[0] for p in services["dashboard"]["ports"]}
    (dash_host_port,) = {_default(p) if p.startswith("${") else p for p in dash_ports}
    api_port = _default(str(services["api"]["ports"][0]).rsplit(":", 1)[0])
    for name in builders:
        env = services[name]["environment"]
        assert "GRPOSCOPE_DASHBOARD_URL" in env, f"{name} builds links without the dashboard URL"
        url = urlparse(_default(env["GRPOSCOPE_DASHBOARD_URL"]))
        assert url.scheme in ("http", "https") and url.hostname
        assert str(url.port) == dash_host_port != api_port, (name, url.geturl())
        assert url.path in ("", "/")
        # the public URL stays the API's (login links, printed URLs)
        assert str(urlparse(_default(env["GRPOSCOPE_PUBLIC_URL"])).port) == api_port
