"""``skdbal labelstudio``'s handling of the token and of TLS, against a small HTTPS server on 127.0.0.1.

The server has a certificate made for the test (openssl), so an unverified connection is what the
client must refuse, and the same certificate given as ``--ca-bundle`` is what it must accept. It
records the headers it is sent, and answers every request 401, as Label Studio does to a wrong token.
"""
import http.server
import json
import logging
import os
import shutil
import ssl
import subprocess
import threading

import pytest

from skdbal.cli import main
from skdbal.labelstudio.cli import connect, read_token

pytest.importorskip("label_studio_sdk", reason="the labelstudio extra (label-studio-sdk) is not installed")

SECRET = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test server's certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"detail": "Invalid token."}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}", str(cert), seen
    server.shutdown()


def test_an_https_certificate_is_verified(tls_server):
    url, cert, seen = tls_server
    import httpx

    n = len(seen)
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        connect(url, SECRET).projects.list(page_size=1)
    assert len(seen) == n                                        # nothing was sent: the handshake failed
    from label_studio_sdk.core.api_error import ApiError

    with pytest.raises(ApiError) as refused:                     # with its CA, the request goes, token and all
        connect(url, SECRET, ca_bundle=cert).projects.list(page_size=1)
    assert refused.value.status_code == 401
    assert seen[-1][0].startswith("/api/projects") and SECRET in seen[-1][1]


def test_the_token_is_never_printed_or_logged(tls_server, tmp_path, capsys, caplog, monkeypatch):
    url, cert, seen = tls_server
    monkeypatch.setenv("SKDBAL_TEST_LS_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SystemExit) as exit_:
        main(["labelstudio", "--demo", "digits", "--url", url, "--token-env", "SKDBAL_TEST_LS_TOKEN",
              "--ca-bundle", cert, "--project", "1", "--store", str(tmp_path / "s.db")])
    assert exit_.value.code == 2
    out = capsys.readouterr()
    assert "refused the token from the environment variable SKDBAL_TEST_LS_TOKEN (401)" in out.err
    assert seen and SECRET in seen[-1][1]                          # it was sent, to the server only
    for text in (out.out, out.err, caplog.text):
        assert SECRET not in text
    assert not (tmp_path / "s.db").exists()                        # refused before the store was made


def test_plain_http_to_another_machine_is_refused_and_loopback_is_not():
    with pytest.raises(ValueError, match="plain HTTP to another machine"):
        connect("http://label.example.org:8080", SECRET)
    with pytest.raises(ValueError, match="http"):
        connect("ftp://127.0.0.1/", SECRET)
    assert connect("http://label.example.org:8080", SECRET, allow_http=True) is not None
    assert connect("http://127.0.0.1:8080", SECRET) is not None and connect("http://localhost:1", SECRET) is not None


def test_the_token_comes_from_a_variable_or_a_private_file(tmp_path):
    assert read_token(env="V", environ={"V": f"  {SECRET}\n"}) == SECRET
    with pytest.raises(ValueError, match="V2 .* not set") as e:
        read_token(env="V2", environ={"V": SECRET})
    assert SECRET not in str(e.value)
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    os.chmod(path, 0o600)
    assert read_token(file=str(path)) == SECRET
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="can be read by others .*644.*chmod 600") as e:
        read_token(file=str(path))
    assert SECRET not in str(e.value)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    os.chmod(empty, 0o600)
    with pytest.raises(ValueError, match="is empty"):
        read_token(file=str(empty))
    with pytest.raises(ValueError, match="one of them"):
        read_token()


@pytest.mark.parametrize("option", ["--token=" + SECRET, "--api-key=" + SECRET])
def test_a_token_on_the_command_line_is_refused_without_echo(option, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["labelstudio", "--demo", "digits", "--url", "http://127.0.0.1:1", "--project", "1",
              "--token-env", "X", option])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "is not taken" in err and SECRET not in err
