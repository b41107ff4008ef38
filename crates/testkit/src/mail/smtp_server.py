"""The SMTP server the email channel's integration tests send through (aiosmtpd).

Listens on 127.0.0.1 twice: submission with STARTTLS required before AUTH, and
implicit TLS; both require AUTH PLAIN or LOGIN with the given credentials. Every
accepted mail is written to the output directory as NNNN.eml (the bytes received) and
NNNN.json (envelope, whether the session was authenticated and encrypted), the JSON
last, each by rename so a reader never sees half a file. Recipients whose local part
starts with "reject" get 550, with "defer" 451. Prints "ports <starttls> <tls>" once
listening; exits when its standard input closes (the test is gone).
"""

import argparse
import asyncio
import json
import logging
import os
import ssl
import sys
import threading
import warnings

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


class Recorder:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@", 1)[0].lower()
        if local.startswith("reject"):
            return "550 5.1.1 mailbox unavailable"
        if local.startswith("defer"):
            return "451 4.3.0 try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        base = os.path.join(self.out_dir, "%04d" % self.count)
        write_atomically(base + ".eml", envelope.original_content or envelope.content)
        meta = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "authenticated": bool(session.authenticated),
            "encrypted": session.ssl is not None
            or server.transport.get_extra_info("sslcontext") is not None,
        }
        write_atomically(base + ".json", json.dumps(meta).encode())
        return "250 2.0.0 queued"


def write_atomically(path, data):
    with open(path + ".tmp", "wb") as file:
        file.write(data)
    os.rename(path + ".tmp", path)


def main():
    # The implicit-TLS listener requires AUTH without STARTTLS on purpose, and aiosmtpd
    # warns about its own deprecated attributes; neither is news to a test run.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    arguments = parser.parse_args()

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(arguments.cert, arguments.key)
    recorder = Recorder(arguments.out)

    def authenticator(server, session, envelope, mechanism, auth_data):
        accepted = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login.decode() == arguments.user
            and auth_data.password.decode() == arguments.password
        )
        return AuthResult(success=accepted, handled=False)

    def submission():
        return SMTP(
            recorder,
            hostname="localhost",
            tls_context=context,
            require_starttls=True,
            auth_required=True,
            auth_require_tls=True,
            authenticator=authenticator,
        )

    def implicit_tls():
        # The whole connection is TLS already, so AUTH needs no STARTTLS first.
        return SMTP(
            recorder,
            hostname="localhost",
            auth_required=True,
            auth_require_tls=False,
            authenticator=authenticator,
        )

    async def serve():
        loop = asyncio.get_running_loop()
        plain = await loop.create_server(submission, host="127.0.0.1", port=0)
        wrapped = await loop.create_server(implicit_tls, host="127.0.0.1", port=0, ssl=context)
        ports = (plain.sockets[0].getsockname()[1], wrapped.sockets[0].getsockname()[1])
        print("ports %d %d" % ports, flush=True)
        await asyncio.Event().wait()

    def exit_when_stdin_closes():
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    asyncio.run(serve())


if __name__ == "__main__":
    main()
