"""``expediter http import URL``: the document fetched from a real server on 127.0.0.1 through
the egress guard (which ``--allow-network`` opens for the fetch as for the calls), redirects
checked again, a time limit and a size cap; relative servers resolved against the URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from expediter_http.openapi import fetching
from servers import Reply, TestServer

SPECS = Path(__file__).parent / "specs"
YAML = (SPECS / "petstore-3.0.yaml").read_text()

Run = Callable[..., Result]


def stored(run: Run) -> list[dict[str, Any]]:
    return list(json.loads(run("instances", "ls", "--json").stdout))


def serve_yaml(server: TestServer, path: str = "/openapi.yaml", **headers: str) -> str:
    # Served as a binary type, as many servers serve YAML: the text is read all the same.
    sent = {"Content-Type": "application/octet-stream", **headers}
    server.route("GET", path, Reply(headers=sent, body=YAML.encode()))
    return server.url + path


def test_a_document_url_is_fetched_when_the_network_is_allowed(run: Run, server) -> None:
    url = serve_yaml(server)
    result = run("http", "import", url, "--name", "shop", "--allow-network", "127.0.0.0/8")
    assert result.exit_code == 0, result.output
    (request,) = server.received
    assert (request.method, request.target) == ("GET", "/openapi.yaml")
    (record,) = stored(run)
    assert record["id"] == result.stdout.strip()
    assert record["config"]["base_url"] == "https://eu.pets.example.com/v3"
    assert record["config"]["allow_networks"] == ["127.0.0.0/8"]
    assert len(record["config"]["actions"]) == 7


def test_without_an_allowed_network_the_guard_refuses_the_fetch(run: Run, server) -> None:
    url = serve_yaml(server)
    result = run("http", "import", url, "--name", "shop")
    assert result.exit_code == 2
    assert "the egress guard refused to fetch the document" in result.stderr
    assert "127.0.0.1 is in 127.0.0.0/8 (loopback)" in result.stderr
    assert "--allow-network 127.0.0.1/32" in result.stderr
    assert not server.received  # nothing was dialed
    assert stored(run) == []


def test_the_hosts_egress_allowance_opens_the_fetch(
    run: Run, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPEDITER_EGRESS_ALLOW", "127.0.0.1/32")
    result = run("http", "import", serve_yaml(server), "--name", "shop")
    assert result.exit_code == 0, result.output


def test_a_relative_server_is_under_the_documents_url(run: Run, server) -> None:
    document = json.loads((SPECS / "petstore-3.1.json").read_text())
    document["servers"] = [{"url": "/api/v3"}]
    server.route("GET", "/spec/openapi.json", Reply(body=document))
    result = run(
        "http",
        "import",
        server.url + "/spec/openapi.json?token=never-shown",
        "--name",
        "shop",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert result.exit_code == 0, result.output
    assert "relative" not in result.stderr
    assert "egress" not in result.stderr  # the base URL is allowed
    (record,) = stored(run)
    assert record["config"]["base_url"] == server.url + "/api/v3"
    assert "never-shown" not in result.output + json.dumps(record)


def test_a_document_without_servers_is_served_where_it_was_fetched(run: Run, server) -> None:
    document = json.loads((SPECS / "petstore-3.1.json").read_text())
    document.pop("servers", None)
    server.route("GET", "/openapi.json", Reply(body=document))
    result = run(
        "http",
        "import",
        server.url + "/openapi.json",
        "--name",
        "shop",
        "--allow-network",
        "127.0.0.1",
    )
    assert result.exit_code == 0, result.output
    (record,) = stored(run)
    assert record["config"]["base_url"] == server.url


def test_a_redirect_is_followed_and_each_hop_checked(run: Run, server) -> None:
    url = serve_yaml(server, "/v2/openapi.yaml")
    server.route("GET", "/latest", Reply(302, {"Location": "/v2/openapi.yaml"}))
    result = run(
        "http",
        "import",
        server.url + "/latest",
        "--name",
        "shop",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert result.exit_code == 0, result.output
    assert [request.target for request in server.received] == ["/latest", "/v2/openapi.yaml"]
    assert url.endswith("/v2/openapi.yaml")


def test_a_redirect_to_a_private_address_is_refused_before_dialing(run: Run, server) -> None:
    server.route("GET", "/latest", Reply(302, {"Location": "http://10.20.30.40/openapi.yaml"}))
    result = run(
        "http",
        "import",
        server.url + "/latest",
        "--name",
        "shop",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert result.exit_code == 2
    assert "10.20.30.40" in result.stderr
    assert "egress" in result.stderr
    assert stored(run) == []


def test_an_error_status_exits_2_naming_it(run: Run, server) -> None:
    server.route("GET", "/gone.yaml", Reply(404, body="no such document"))
    result = run(
        "http",
        "import",
        server.url + "/gone.yaml",
        "--name",
        "x",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert result.exit_code == 2
    assert "HTTP 404" in result.stderr


def test_a_document_over_the_cap_is_refused(
    run: Run, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetching, "MAX_FETCH_BYTES", 1000)
    url = serve_yaml(server)
    result = run("http", "import", url, "--name", "x", "--allow-network", "127.0.0.0/8")
    assert result.exit_code == 2
    assert "larger than 1000 bytes" in result.stderr


def test_a_server_that_does_not_answer_in_time_is_given_up_on(
    run: Run, server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fetching, "FETCH_TIMEOUT", 0.5)
    server.route("GET", "/slow.yaml", Reply(body=YAML, delay=5))
    result = run(
        "http",
        "import",
        server.url + "/slow.yaml",
        "--name",
        "x",
        "--allow-network",
        "127.0.0.0/8",
    )
    assert result.exit_code == 2
    assert "did not finish within 0.5 s" in result.stderr


def test_binary_content_is_not_a_document(run: Run, server) -> None:
    server.route("GET", "/blob", Reply(headers={"Content-Type": "image/png"}, body=b"\x89PNG\xff"))
    result = run(
        "http", "import", server.url + "/blob", "--name", "x", "--allow-network", "127.0.0.0/8"
    )
    assert result.exit_code == 2
    assert "binary content" in result.stderr


def test_a_one_line_answer_is_never_read_as_a_path(tmp_path: Path, server) -> None:
    # A file whose name the server answers with must not be opened.
    (tmp_path / "secret.yaml").write_text(YAML)
    server.route("GET", "/trick", Reply(body=str(tmp_path / "secret.yaml")))
    text = fetching.fetch_document(server.url + "/trick", ["127.0.0.0/8"])
    from expediter_http.openapi import load_document

    with pytest.raises(ValueError, match="an OpenAPI document is an object"):
        load_document(text)
