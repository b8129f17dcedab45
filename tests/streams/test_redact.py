"""Privacy redaction of experience text (streams.redaction.redact).

Every personal detail below is invented: names, example.com / example.org / example.net
addresses, 555-01xx and Ofcom drama numbers (07700 900xxx, 020 7946 0xxx), and tokens built by
:func:`_fake` (deterministic filler in each provider's documented shape, never a real credential;
assembled at import time so that secret scanners do not flag this file).
"""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.redaction.redact import (
    PLACEHOLDER_RE,
    PiiKind,
    Redacted,
    RedactionMode,
    placeholder,
    redact,
    redact_fields,
)
from tests.support.kb_hardening import CARD_NEGATIVES, CARDS, NAMED_SECRETS, REDACTION_CLASSES

_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_B64 = _ALNUM + "+/"


def _fake(prefix: str, n: int, *, salt: int = 0, alphabet: str = _ALNUM) -> str:
    """``prefix`` + ``n`` deterministic filler characters from ``alphabet`` (an invented token)."""
    return prefix + "".join(alphabet[(i * 7 + salt * 13 + 5) % len(alphabet)] for i in range(n))


OPENAI_PROJ = _fake("sk-proj-", 48, salt=1)
OPENAI_LEGACY = _fake("sk-", 48, salt=2)
OPENAI_SEED = "sk-" + "abcdefghijklmnopqrstuvwxyzABCDEFGH"  # the seed's shape: 32+ letters only
ANTHROPIC = _fake("sk-ant-api03-", 93, salt=3) + "AA"
AWS_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example id
AWS_STS_ID = _fake("ASIA", 16, salt=4, alphabet=_UPPER_DIGITS)
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"  # AWS's documented example secret
GH_PAT_CLASSIC = _fake("ghp_", 36, salt=5)
GH_PAT_FINE = _fake("github_pat_", 22, salt=6) + "_" + _fake("", 59, salt=7)
GH_SERVER = _fake("ghs_", 36, salt=8)
GH_OAUTH = _fake("gho_", 36, salt=9)
GITLAB = _fake("glpat-", 20, salt=10)
SLACK_BOT = "xoxb-" + "2048123456789-4096123456789-" + _fake("", 24, salt=11)
SLACK_USER = "xoxp-" + "2048123456789-2048765432109-4096123456789-" + _fake("", 32, salt=12, alphabet=string.hexdigits[:16])
SLACK_APP = "xapp-1-" + "A0FAKE12345-4096123456789-" + _fake("", 64, salt=13, alphabet=string.hexdigits[:16])
SLACK_HOOK_PATH = "T0FAKE0001/B0FAKE0002/" + _fake("", 24, salt=14)
GOOGLE_API = _fake("AIza", 35, salt=15)
GOOGLE_OAUTH = _fake("ya29.", 120, salt=16, alphabet=_ALNUM + "-_")
GOOGLE_CLIENT_SECRET = _fake("GOCSPX-", 28, salt=17)
STRIPE = _fake("sk_live_", 99, salt=18)
HF = _fake("hf_", 34, salt=19)
NPM = _fake("npm_", 36, salt=20)
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + _fake("eyJ", 60, salt=21, alphabet=_ALNUM + "-_") + "." + _fake("", 43, salt=22, alphabet=_ALNUM + "-_")
BEARER_OPAQUE = _fake("", 40, salt=23, alphabet=_ALNUM + "-._~")
BASIC = "YWxpY2U6aHVudGVyMg=="  # base64("alice:hunter2")
AWS_SESSION = _fake("IQoJb3JpZ2luX2VjE", 80, salt=24, alphabet=_B64)
PEM_BODY = [_fake("", 64, salt=30 + i, alphabet=_B64) for i in range(4)] + [_fake("", 28, salt=34, alphabet=_B64) + "=="]
PEM_RSA = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END RSA PRIVATE KEY-----"
PEM_OPENSSH_JSON = "-----BEGIN OPENSSH PRIVATE KEY-----\\n" + "\\n".join(PEM_BODY[:3]) + "\\n-----END OPENSSH PRIVATE KEY-----\\n"
PEM_PGP = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(PEM_BODY[1:]) + "\n=Xq8T\n-----END PGP PRIVATE KEY BLOCK-----"


@dataclass(frozen=True)
class Case:
    """A strict-mode case: ``secrets`` must all disappear, ``counts`` is the exact count per kind."""

    id: str
    text: str
    secrets: tuple[str, ...]
    counts: dict[str, int]


def _c(id: str, text: str, secrets: tuple[str, ...], **counts: int) -> Case:
    return Case(id, text, secrets, dict(counts))


CASES: list[Case] = [
    # --- home directories -------------------------------------------------------------------
    _c(
        "macos-build-fix-openai",
        f"Fixed the build on /Users/mkovacs/src/app by exporting OPENAI_API_KEY={OPENAI_PROJ} before `npm run build`.",
        ("mkovacs", OPENAI_PROJ),
        home_user=1,
        openai_key=1,
    ),
    _c(
        "python-traceback-macos",
        'Traceback (most recent call last):\n  File "/Users/mkovacs/src/app/main.py", line 42, in <module>\n    run()\n'
        '  File "/Users/mkovacs/src/app/jobs.py", line 7, in run\n    raise KeyError("queue")\nKeyError: \'queue\'',
        ("mkovacs",),
        home_user=2,
    ),
    _c(
        "python-traceback-linux-venv",
        'File "/home/dwilliams/.venv/lib/python3.11/site-packages/httpx/_client.py", line 1013, in send\nhttpx.ConnectTimeout: timed out',
        ("dwilliams",),
        home_user=1,
    ),
    _c(
        "node-stack-macos",
        "TypeError: Cannot read properties of undefined (reading 'id')\n"
        "    at Object.<anonymous> (/Users/akowalski/dev/api/src/index.ts:14:7)\n"
        "    at Module._compile (/Users/akowalski/dev/api/node_modules/ts-node/src/index.ts:1618:23)",
        ("akowalski",),
        home_user=2,
    ),
    _c(
        "windows-user-with-space",
        r"npm ERR! path C:\Users\Carol Jensen\AppData\Roaming\npm\node_modules\pnpm",
        ("Carol Jensen", "Jensen"),
        home_user=1,
    ),
    _c(
        "windows-forward-slashes",
        "Opened C:/Users/pnakamura/repos/hivestream/README.md in VS Code and fixed the relative links.",
        ("pnakamura",),
        home_user=1,
    ),
    _c(
        "windows-json-escaped",
        '{"cwd": "C:\\\\Users\\\\rfernandes\\\\work\\\\billing", "shell": "pwsh"}',
        ("rfernandes",),
        home_user=1,
    ),
    _c(
        "macos-json-escaped-slashes",
        '{"log":"\\/Users\\/tlindqvist\\/Library\\/Logs\\/agent.log"}',
        ("tlindqvist",),
        home_user=1,
    ),
    _c(
        "windows-documents-and-settings",
        r"Legacy installer wrote to C:\Documents and Settings\mbrown\Desktop\setup.log",
        ("mbrown",),
        home_user=1,
    ),
    _c(
        "vscode-file-url",
        "Breakpoint hit in file:///Users/hwatanabe/work/etl/pipeline.py#L88 after the retry loop.",
        ("hwatanabe",),
        home_user=1,
    ),
    _c(
        "conda-env-linux",
        "Solved by `conda activate /home/sgarcia/miniconda3/envs/ml` then `pip install -e .`",
        ("sgarcia",),
        home_user=1,
    ),
    _c(
        "lowercase-windows-users",
        r"Python 3.11 lives in c:\users\oadeyemi\appdata\local\programs\python\python311",
        ("oadeyemi",),
        home_user=1,
    ),
    _c(
        "compiler-flags-and-wsl",
        "cc -I/Users/lmartin/include -L/home/lmartin/lib main.c; cp out.bin /mnt/c/Users/LMartin/Desktop/",
        ("lmartin", "LMartin"),
        home_user=3,
    ),
    # --- e-mail addresses -------------------------------------------------------------------
    _c(
        "gitconfig-email",
        "[user]\n\tname = Maja Kovacs\n\temail = maja.kovacs@example.com\n[core]\n\teditor = vim",
        ("maja.kovacs@example.com",),
        email=1,
    ),
    _c(
        "git-log-author-plus-tag",
        "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: Priya Raman <priya.raman+ci@example.org>\nDate:   Mon Nov 30 12:30:45 2026 +0100",
        ("priya.raman+ci@example.org", "priya.raman"),
        email=1,
    ),
    _c(
        "mailmap-two-addresses",
        "Jane Doe <jane@example.com> <jane.doe@old.example.org>",
        ("jane@example.com", "jane.doe@old.example.org"),
        email=2,
    ),
    _c(
        "mailto-link",
        '<a href="mailto:support-team@example.net?subject=Build%20broken">Contact support</a>',
        ("support-team@example.net",),
        email=1,
    ),
    _c(
        "github-noreply-address",
        "Signed-off-by: Tomas Eriksen <48213+teriksen@users.noreply.example.com>",
        ("teriksen",),
        email=1,
    ),
    _c(
        "package-json-author",
        '"author": "Ines Moreau <ines.moreau@example.fr> (https://example.fr/ines)",',
        ("ines.moreau@example.fr",),
        email=1,
    ),
    # --- phone numbers ----------------------------------------------------------------------
    _c(
        "support-ticket-uk-international",
        "Customer asked us to call back on +44 20 7946 0958 after 14:00 about invoice INV-2026-0042.",
        ("+44 20 7946 0958", "7946 0958"),
        phone=1,
    ),
    _c(
        "north-american-formats",
        "Escalation contacts: (415) 555-0134 (on call), 415.555.0178 (backup).",
        ("(415) 555-0134", "555-0134", "415.555.0178"),
        phone=2,
    ),
    _c(
        "seed-format-dashes",
        "Pager: 415-555-0123, ext. 12",
        ("415-555-0123",),
        phone=1,
    ),
    _c(
        "toll-free-with-country-prefix",
        "Vendor hotline 1-800-555-0199 is open 24/7.",
        ("800-555-0199",),
        phone=1,
    ),
    _c(
        "uk-national-landline-and-mobile",
        "Office 020 7946 0321, mobile 07700 900123 (Ofcom test range).",
        ("020 7946 0321", "07700 900123", "900123"),
        phone=2,
    ),
    _c(
        "german-national-and-international",
        "Rückruf unter 030 123456 78 oder +49 30 1234 5678 bitte.",
        ("030 123456 78", "+49 30 1234 5678", "123456 78"),
        phone=2,
    ),
    _c(
        "german-slash-and-parentheses",
        "Tel. 030/12345678, Fax (030) 1234 5679",
        ("030/12345678", "12345678", "1234 5679"),
        phone=2,
    ),
    _c(
        "french-pairs",
        "Appeler Mme Laurent au 06 12 34 56 78 ou au +33 6 98 76 54 32.",
        ("06 12 34 56 78", "+33 6 98 76 54 32", "98 76 54 32"),
        phone=2,
    ),
    _c(
        "dutch-mobile-dash",
        "Bel de monteur: 06-12345678 (alleen werkdagen).",
        ("06-12345678",),
        phone=1,
    ),
    _c(
        "twilio-e164-no-separators",
        "TWILIO_FROM=+14155550134\nTWILIO_TO=+447700900456",
        ("+14155550134", "4155550134", "+447700900456"),
        phone=2,
    ),
    _c(
        "phone-in-parentheses-with-trunk",
        "Reach Dev Patel (+44 (0)20 7946 0777) for the staging VPN.",
        ("7946 0777",),
        phone=1,
    ),
    # --- provider tokens --------------------------------------------------------------------
    _c(
        "openai-legacy-key-prose",
        f"The key {OPENAI_LEGACY} leaked into the CI log, so it was revoked and rotated.",
        (OPENAI_LEGACY,),
        openai_key=1,
    ),
    _c(
        "openai-key-in-bearer-header",
        f'curl https://api.openai.com/v1/models -H "Authorization: Bearer {OPENAI_PROJ}"',
        (OPENAI_PROJ,),
        openai_key=1,
    ),
    _c(
        "seed-shape-openai-key",
        f"OPENAI_KEY was {OPENAI_SEED} in the old notebook.",
        (OPENAI_SEED,),
        openai_key=1,
    ),
    _c(
        "anthropic-python-client",
        f'client = anthropic.Anthropic(api_key="{ANTHROPIC}")\nmsg = client.messages.create(model=model, max_tokens=1024)',
        (ANTHROPIC,),
        anthropic_key=1,
    ),
    _c(
        "aws-credentials-file",
        f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1",
        (AWS_ID, AWS_SECRET),
        aws_key=2,
    ),
    _c(
        "aws-sts-exports",
        f"export AWS_ACCESS_KEY_ID={AWS_STS_ID}\nexport AWS_SESSION_TOKEN={AWS_SESSION}",
        (AWS_STS_ID, AWS_SESSION),
        aws_key=1,
        secret=1,
    ),
    _c(
        "github-classic-pat-cli",
        f"gh auth login --with-token <<< {GH_PAT_CLASSIC}",
        (GH_PAT_CLASSIC,),
        github_token=1,
    ),
    _c(
        "github-fine-grained-pat-env",
        f"GITHUB_TOKEN={GH_PAT_FINE}\nGH_REPO=example-org/hivestream",
        (GH_PAT_FINE,),
        github_token=1,
    ),
    _c(
        "github-app-token-in-clone-url",
        f"git clone https://x-access-token:{GH_SERVER}@github.com/example-org/infra.git",
        (GH_SERVER, "x-access-token"),
        github_token=1,
        url_credentials=1,
    ),
    _c(
        "github-oauth-api-token-header",
        f'curl -H "Authorization: token {GH_OAUTH}" https://api.github.com/user',
        (GH_OAUTH,),
        github_token=1,
    ),
    _c(
        "gitlab-ci-variable",
        f"variables:\n  GITLAB_API: https://gitlab.example.com/api/v4\n  PRIVATE_TOKEN_VALUE: {GITLAB}",
        (GITLAB,),
        gitlab_token=1,
    ),
    _c(
        "slack-webhook-env",
        f"SLACK_WEBHOOK_URL=https://hooks.slack.com/services/{SLACK_HOOK_PATH}\n# posts deploy notices to #releases",
        (SLACK_HOOK_PATH, "B0FAKE0002"),
        slack_token=1,
    ),
    _c(
        "slack-bot-token-python",
        f'client = WebClient(token="{SLACK_BOT}")\nclient.chat_postMessage(channel="#deploys", text="done")',
        (SLACK_BOT,),
        slack_token=1,
    ),
    _c(
        "slack-user-token-curl",
        f"curl -X POST -d 'token={SLACK_USER}&channel=C0FAKE123' https://slack.com/api/chat.postMessage",
        (SLACK_USER,),
        slack_token=1,
    ),
    _c(
        "slack-app-token-socket-mode",
        f"SLACK_APP_TOKEN={SLACK_APP} python bolt_app.py  # socket mode",
        (SLACK_APP,),
        slack_token=1,
    ),
    _c(
        "google-maps-key-in-url",
        f"GET https://maps.googleapis.com/maps/api/geocode/json?address=10+Downing+St&key={GOOGLE_API} -> 200",
        (GOOGLE_API,),
        google_key=1,
    ),
    _c(
        "google-oauth-access-token",
        f"$ gcloud auth print-access-token\n{GOOGLE_OAUTH}\n$ echo done",
        (GOOGLE_OAUTH,),
        google_key=1,
    ),
    _c(
        "google-client-secret-json",
        f'{{"installed": {{"client_id": "1234-abc.apps.googleusercontent.com", "client_secret": "{GOOGLE_CLIENT_SECRET}"}}}}',
        (GOOGLE_CLIENT_SECRET,),
        google_key=1,
    ),
    _c(
        "stripe-live-key",
        f"stripe.api_key = '{STRIPE}'  # TODO move to vault",
        (STRIPE,),
        stripe_key=1,
    ),
    _c(
        "huggingface-cli-login",
        f"huggingface-cli login --token {HF} --add-to-git-credential",
        (HF,),
        huggingface_token=1,
    ),
    _c(
        "npmrc-auth-token",
        f"//registry.npmjs.org/:_authToken={NPM}\nalways-auth=true",
        (NPM,),
        npm_token=1,
    ),
    # --- generic credentials ----------------------------------------------------------------
    _c(
        "curl-bearer-opaque",
        f'curl -sS -H "Authorization: Bearer {BEARER_OPAQUE}" https://api.example.com/v1/jobs?limit=20',
        (BEARER_OPAQUE,),
        bearer_token=1,
    ),
    _c(
        "bearer-jwt-header",
        f"GET /v2/orders HTTP/1.1\nHost: shop.example.com\nAuthorization: Bearer {JWT}\nAccept: application/json",
        (JWT,),
        bearer_token=1,
    ),
    _c(
        "jwt-in-cookie",
        f"Set-Cookie: session={JWT}; Path=/; HttpOnly; Secure",
        (JWT,),
        jwt=1,
    ),
    _c(
        "basic-auth-header",
        f"requests.get(url, headers={{'Authorization': 'Basic {BASIC}'}})",
        (BASIC,),
        auth_header=1,
    ),
    _c(
        "redis-url-credentials",
        "REDIS_URL=redis://default:R3d1sPassw0rd@cache.example.net:6379/0",
        ("R3d1sPassw0rd", "default:R3d1s"),
        url_credentials=1,
    ),
    _c(
        "compose-postgres-password",
        'services:\n  db:\n    image: postgres:16\n    environment:\n      POSTGRES_PASSWORD: "pg-Dev-2026-xyz"\n      POSTGRES_DB: app',
        ("pg-Dev-2026-xyz",),
        secret=1,
    ),
    _c(
        "yaml-api-key-hex",
        "weather:\n  api_key: 9c1f4e7a2b8d4c3e9f0a1b2c3d4e5f60\n  units: metric",
        ("9c1f4e7a2b8d4c3e9f0a1b2c3d4e5f60",),
        secret=1,
    ),
    _c(
        "json-password",
        '{"username": "svc-backup", "password": "Tr0ub4dor&3x"}',
        ("Tr0ub4dor&3x",),
        secret=1,
    ),
    _c(
        "oauth-callback-query-string",
        "Redirected to https://app.example.com/cb#access_token=Zx81kQp0aa7Bn2&state=af3e9&token_type=Bearer",
        ("Zx81kQp0aa7Bn2",),
        secret=1,
    ),
    _c(
        "json-in-json-password",
        '{"body": "{\\"username\\": \\"svc\\", \\"password\\": \\"Rk4v9qLz2m\\"}"}',
        ("Rk4v9qLz2m",),
        secret=1,
    ),
    _c(
        "yaml-quoted-passphrase-with-spaces",
        'ssh:\n  key_passphrase_password: "correct horse battery 42"',
        ("correct horse battery 42", "battery 42"),
        secret=1,
    ),
    # --- private keys -----------------------------------------------------------------------
    _c(
        "pem-rsa-block",
        f"Wrote deploy key to disk by mistake:\n{PEM_RSA}\nthen ran chmod 600.",
        tuple(PEM_BODY),
        private_key=1,
    ),
    _c(
        "pem-openssh-json-escaped",
        f'{{"ssh_key": "{PEM_OPENSSH_JSON}", "user": "deploy"}}',
        tuple(PEM_BODY[:3]),
        private_key=1,
    ),
    _c(
        "pem-truncated-no-end",
        "-----BEGIN EC PRIVATE KEY-----\n" + "\n".join(PEM_BODY[:2]) + "\n... (output truncated)",
        tuple(PEM_BODY[:2]),
        private_key=1,
    ),
    _c(
        "pgp-private-key-block",
        f"gpg --export-secret-keys --armor printed:\n{PEM_PGP}",
        tuple(PEM_BODY[1:]),
        private_key=1,
    ),
    # --- mixed, realistic experiences -------------------------------------------------------
    _c(
        "dotenv-file",
        f"# .env (local only)\nOPENAI_API_KEY={OPENAI_PROJ}\nANTHROPIC_API_KEY={ANTHROPIC}\n"
        "DATABASE_URL=postgres://app:Pg5ecret2026@db.example.com:5432/app\nSUPPORT_EMAIL=help@example.com\nPORT=8080",
        (OPENAI_PROJ, ANTHROPIC, "Pg5ecret2026", "help@example.com"),
        openai_key=1,
        anthropic_key=1,
        url_credentials=1,
        email=1,
    ),
    _c(
        "bug-report-contact",
        "Reported by Lena Okafor (lena.okafor@example.com, +1 415 555 0167); logs at /home/lokafor/.cache/app/app.log",
        ("lena.okafor@example.com", "+1 415 555 0167", "555 0167", "lokafor"),
        email=1,
        phone=1,
        home_user=1,
    ),
    _c(
        "seed-redactSensitiveInfo-inputs",
        f"user /Users/alice/proj, mail bob@example.com, phone 415-555-0123, key {OPENAI_SEED}",
        ("alice", "bob@example.com", "415-555-0123", OPENAI_SEED),
        home_user=1,
        email=1,
        phone=1,
        openai_key=1,
    ),
    _c(
        "experience-json-everything",
        '{"problem": "CI could not push", "context": "runner /home/jbakker/actions-runner/_work", '
        f'"solution": "set GH token {GH_PAT_CLASSIC} for jbakker@example.org and restart; call 07700 900461 if it fails"}}',
        ("jbakker", GH_PAT_CLASSIC, "jbakker@example.org", "07700 900461"),
        home_user=1,
        github_token=1,
        email=1,
        phone=1,
    ),
    _c(
        "agent-transcript-windows",
        r"PS C:\Users\Anna Svensson\src\shop> $env:STRIPE_KEY='" + STRIPE + "'; npm test  # ping anna.svensson@example.se",
        ("Anna Svensson", "Svensson", STRIPE, "anna.svensson@example.se"),
        home_user=1,
        stripe_key=1,
        email=1,
    ),
]

NEGATIVES: list[str] = [
    "Released 2026-11-30 at 12:30:45Z; the next window opens 2026-12-07T09:00:00+01:00.",
    "Bumped version 1.2.3 -> 1.10.0 (python 3.11.7, node v20.11.1, pnpm 9.12.3).",
    "Server listening on 0.0.0.0:8080; upstream 192.168.1.10:5432 and 10.0.0.255 via fe80::1ff:fe23:4567:890a.",
    "request_id=123e4567-e89b-12d3-a456-426614174000 parent=00000000-0000-0000-0000-000000000000",
    "commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 (short 3f2a9c1) merged into main",
    "Downloaded 1048576 bytes (1,048,576 B) in 0.42 s; cache holds 2147483648 bytes.",
    "src/app.ts:123:45 - error TS2345: Argument of type 'string' is not assignable.",
    "created_at=1764500000000 updated_at=1764500000 ttl_ms=86400000",
    "Retry after 30 s; HTTP 429; exit code 137; PID 48213; port 5432",
    "for i in range(0, 100):\n    y = x @ w.T + b[i]",
    "@@ -120,7 +120,9 @@ def main():\n+    return 0",
    "npm i @types/node@20.11.0 && pip install requests==2.31.0 && git push git@github.com:example-org/hivestream.git",
    '<img src="logo@2x.png" srcset="logo@3x.png 3x">',
    "Use Bearer authentication with a token from the vault; see the Authorization header docs.",
    "interface Login { token: string; password?: string; apiKey: ApiKey }",
    "max_tokens: 4096\ntemperature: 0.2\ntokenizer: cl100k_base",
    'export OPENAI_API_KEY="$OPENAI_API_KEY"; curl -H "Authorization: Bearer ${TOKEN}" https://api.example.com',
    "Meeting 05.11.2026 09:30, deadline 30/11/2026, invoice date 01.12.2026.",
    "Config lives in ~/projects/app/.config and /Users/Shared/Builds; brew at /home/linuxbrew/.linuxbrew/bin/brew.",
    "Pinned at +37.774929, -122.419416 (UTC+05:30).",
    "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f",
    "| p50 | p90 | p99 |\n| 100 200 300 | 400 | 1200 |",
    "ISBN 978-0-13-468599-1, RFC 9110, ISO 8601",
    "resources:\n  limits:\n    memory: 512Mi\n    cpu: 250m",
    "task-runner, risk-assessment-v2 and sk-learn style names are fine",
    "GET https://example.com/users/12345/orders?page=2 -> 200",
    "Foundation, Inc., 51 Franklin St, Fifth Floor, Boston, MA  02110-1301  USA",
    "np.datetime64('1970-01-01T00:00:02.12345678') and np.array(['+1980-02-29 01:02:03Z'])",
    "#include <boost/spirit/home/x3/core/parser.hpp> // see libs/spirit/home/x3",
    'url = f"{dialect}://{quoted_username}:{quoted_password}@{host}:{port}/{database}"',
    "table, path, host, port, access_key, secret_key = s3_example_simple",
    "Already redacted: /Users/[REDACTED:home_user]/x and [REDACTED:email] and Bearer [REDACTED:bearer_token]",
    "",
]


# --- hardening: secrets named by their context and payment card numbers (tests/support/kb_hardening.py) ---
HARDENING_CASES: list[Case] = [Case(c.id, c.text, c.secrets, dict(c.counts)) for pos, _neg in REDACTION_CLASSES.values() for c in pos]
HARDENING_NEGATIVES: list[str] = [text for _pos, neg in REDACTION_CLASSES.values() for text in neg]
CASES += HARDENING_CASES
NEGATIVES += HARDENING_NEGATIVES


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def test_case_set_is_large_and_ids_are_unique() -> None:
    assert len(CASES) >= 50
    assert len(NEGATIVES) >= 15
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.secrets and c.counts for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_strict_removes_every_secret_and_counts_exactly(case: Case) -> None:
    for secret in case.secrets:
        assert secret in case.text, f"case {case.id} does not contain {secret!r}"
    result = redact(case.text)
    for secret in case.secrets:
        assert secret not in result.text, f"{secret!r} survived in {result.text!r}"
    assert result.counts == case.counts
    assert result.total == sum(case.counts.values())
    # Each replacement left exactly one placeholder of its kind (no input has placeholders).
    assert dict(Counter(PLACEHOLDER_RE.findall(result.text))) == case.counts


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_relaxed_keeps_the_input(case: Case) -> None:
    result = redact(case.text, RedactionMode.RELAXED)
    assert result.text == case.text
    assert result.counts == {}
    assert result.total == 0


@pytest.mark.parametrize("text", NEGATIVES)
def test_negatives_are_unchanged(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.counts == {}


@pytest.mark.parametrize("text", [c.text for c in CASES] + NEGATIVES)
def test_idempotent_on_all_cases(text: str) -> None:
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


def test_home_paths_keep_their_structure() -> None:
    assert redact("/Users/alice/project").text == "/Users/[REDACTED:home_user]/project"
    assert redact("/home/bob/x").text == "/home/[REDACTED:home_user]/x"
    assert redact("C:\\Users\\Carol\\x").text == "C:\\Users\\[REDACTED:home_user]\\x"
    assert redact("C:/Users/Carol/x").text == "C:/Users/[REDACTED:home_user]/x"
    assert redact('"C:\\\\Users\\\\Carol\\\\x"').text == '"C:\\\\Users\\\\[REDACTED:home_user]\\\\x"'


def test_placeholders_are_typed_and_stable() -> None:
    for kind in PiiKind:
        marker = placeholder(kind)
        assert marker == f"[REDACTED:{kind.value}]"
        assert PLACEHOLDER_RE.fullmatch(marker) is not None
        # A placeholder is never read as sensitive, alone or in the contexts rules look at.
        for context in ("{}", "/Users/{}/x", "C:\\Users\\{}\\x", "Bearer {}", "TOKEN={}", "https://{}:{}@example.com", "{}@example.com"):
            text = context.format(marker, marker)
            result = redact(text)
            assert result.counts == {}, (kind, context)
            assert result.text == text
    assert redact("a@example.com").text == "[REDACTED:email]"
    assert redact("a@example.com b@example.org").text == "[REDACTED:email] [REDACTED:email]"
    assert {k.value for k in PiiKind} == set(PLACEHOLDER_RE.findall(" ".join(placeholder(k) for k in PiiKind)))


def test_mode_accepts_plain_strings_and_defaults_to_strict() -> None:
    text = "mail maja.kovacs@example.com"
    assert redact(text).text == redact(text, RedactionMode("strict")).text == "mail [REDACTED:email]"
    assert redact(text, RedactionMode("relaxed")).text == text
    assert RedactionMode.STRICT.value == "strict" and RedactionMode.RELAXED.value == "relaxed"
    assert redact(text, RedactionMode.STRICT) == redact(text)


def test_redacted_total_and_equality() -> None:
    r = Redacted("x", {"email": 2, "phone": 1})
    assert r.total == 3
    assert Redacted("x").counts == {} and Redacted("x").total == 0
    assert redact("") == Redacted("", {})


def test_redact_fields_sums_counts_and_keeps_keys() -> None:
    fields = {
        "title": "Deploy fix for /Users/mkovacs",
        "problem": "Push rejected; contact maja.kovacs@example.com or +44 20 7946 0958",
        "solution": f"Rotated {GH_PAT_CLASSIC} and emailed ops@example.org",
        "tags": "ci,github",
    }
    out, counts = redact_fields(fields)
    assert list(out) == list(fields)
    assert counts == {"home_user": 1, "email": 2, "phone": 1, "github_token": 1}
    assert out["tags"] == "ci,github"
    assert out["title"] == "Deploy fix for /Users/[REDACTED:home_user]"
    relaxed, relaxed_counts = redact_fields(fields, RedactionMode.RELAXED)
    assert relaxed == fields and relaxed is not fields
    assert relaxed_counts == {}
    assert redact_fields({}) == ({}, {})


# --- property: idempotence on generated text mixing the patterns ---------------------------

_FRAGMENTS: list[str] = sorted(
    {s for c in CASES for s in c.secrets}
    | set(NEGATIVES)
    | {placeholder(k) for k in PiiKind}
    | {
        "/Users/",
        "/home/",
        "C:\\Users\\",
        "C:\\\\Users\\\\",
        "C:/Users/",
        "Bearer ",
        "Authorization: Basic ",
        "TOKEN=",
        "password: ",
        "https://",
        "://u:",
        "@example.com",
        "@",
        "+44 ",
        "+1 ",
        "(415) ",
        "555-0134",
        "020 ",
        "06 12 ",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "\\n",
        "sk-",
        "ghp_",
        "xoxb-",
        "AIza",
        "eyJ",
        "hooks.slack.com/services/",
        "the password is ",
        "secret ",
        "api key: ",
        '"API Key": "',
        "4242 4242 4242 4242",
        "5555-5555-5555-4444",
        "4111111111111111",
        " ",
        "\n",
    }
)
_NOISE = st.text(alphabet=" /\\:@.-+()[]_=\"'\nabcXYZkx0123456789", max_size=12)
_MIXED = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), _NOISE), max_size=14).map("".join)


@settings(max_examples=400, deadline=None)
@given(_MIXED)
def test_idempotent_property(text: str) -> None:
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == {}
    assert all(n > 0 for n in once.counts.values())
    assert set(once.counts) <= {k.value for k in PiiKind}
    assert redact(text, RedactionMode.RELAXED).text == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(CASES), min_size=1, max_size=4), st.sampled_from([" ", "\n", "; ", " | "]))
def test_concatenated_cases_count_additively(cases: list[Case], sep: str) -> None:
    text = sep.join(c.text for c in cases)
    expected: Counter[str] = Counter()
    for c in cases:
        expected.update(c.counts)
    result = redact(text)
    assert result.counts == dict(expected)
    for c in cases:
        for secret in c.secrets:
            assert secret not in result.text


# --- hardening --------------------------------------------------------------------------------


def _luhn_ok(digits: str) -> bool:
    """Luhn written out the long way (independent of the module's helper)."""
    doubled = [int(d) * (2 if i % 2 else 1) for i, d in enumerate(reversed(digits))]
    return sum(d // 10 + d % 10 for d in doubled) % 10 == 0


def test_each_new_class_has_ten_positives_and_ten_negatives_with_its_own_kind() -> None:
    for kind, (pos, neg) in REDACTION_CLASSES.items():
        assert len(neg) >= 10, kind
        assert sum(c.counts.get(kind, 0) > 0 for c in pos) >= 10, kind


@pytest.mark.parametrize("text", CARD_NEGATIVES)
def test_card_negatives_are_luhn_failing_or_outside_the_card_ranges(text: str) -> None:
    """The digit runs of the card negatives that look like a card (13-19 digits, first digit 2-6,
    standing alone) fail the Luhn check, so keeping them is right."""
    import re

    for run in re.findall(r"(?<![\w.-])\d{4}(?:[ -]\d{3,6}){2,4}(?![\w.])|(?<![\w.-])\d{13,19}(?![\w.])", text):
        digits = re.sub(r"\D", "", run)
        if 13 <= len(digits) <= 19 and digits[0] in "23456":
            assert not _luhn_ok(digits), run
    assert redact(text).counts.get("card_number", 0) == 0


def test_card_positives_pass_luhn_and_redaction_keeps_the_sentence() -> None:
    for c in CARDS:
        for s in c.secrets:
            digits = "".join(ch for ch in s if ch.isdigit())
            assert len(digits) < 13 or _luhn_ok(digits), s
    assert redact("Stripe test card 4242 4242 4242 4242 worked.").text == "Stripe test card [REDACTED:card_number] worked."
    assert redact("Ticket 4242 4242 4242 4241 worked.").counts == {}


def test_named_secret_keeps_the_name_and_replaces_only_the_value() -> None:
    c = next(c for c in NAMED_SECRETS if c.id == "password-for-is")
    assert redact(c.text).text == "The password for the staging database is [REDACTED:named_secret]; changed it after the demo."
    assert redact("rotate the secret monthly").text == "rotate the secret monthly"
    assert redact("the secret is hunter2x").counts == {"named_secret": 1}
    assert redact("the secret is v2-2024-final").counts == {}  # no 6+-character piece mixing letters and digits, no upper case
