"""Manage Growler's service principals and token signing keys (the database of GROWLER_DATABASE_URL).

  python -m scripts.principals create CLIENT_ID [--admin]   prints the new secret (once)
  python -m scripts.principals rotate CLIENT_ID             new secret; older tokens are refused
  python -m scripts.principals delete CLIENT_ID             its tokens are refused from now on
  python -m scripts.principals list
  python -m scripts.principals rotate-key                   a new signing key (needs GROWLER_TOKEN_KEY_PASSWORD)

Running servers pick every change up within about a second (app/edge/auth/state.py).
"""

from __future__ import annotations

import argparse
import os
import sys

from app.edge.auth.keys import new_key
from app.management.principals import PrincipalService
from storage.db import Database
from storage.principals import PrincipalRepository


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.principals", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create")
    create.add_argument("client_id")
    create.add_argument("--admin", action="store_true")
    commands.add_parser("rotate").add_argument("client_id")
    commands.add_parser("delete").add_argument("client_id")
    commands.add_parser("list")
    commands.add_parser("rotate-key")
    args = parser.parse_args(argv)

    url = os.environ.get("GROWLER_DATABASE_URL")
    if not url:
        print("GROWLER_DATABASE_URL is not set", file=sys.stderr)
        return 2
    database = Database(url, max_size=1)
    database.open()
    try:
        repository = PrincipalRepository(database)
        service = PrincipalService(repository)
        if args.command in ("create", "rotate"):
            made = (
                service.create(args.client_id, is_admin=args.admin)
                if args.command == "create"
                else (service.rotate(args.client_id))
            )
            if made is None:
                print(f"{args.command}: no such principal or client id taken: {args.client_id}", file=sys.stderr)
                return 1
            print(f"{made.client_id}:{made.secret}")  # shown once: Spark's credential=id:secret
        elif args.command == "delete":
            if not service.delete(args.client_id):
                print(f"delete: no such principal: {args.client_id}", file=sys.stderr)
                return 1
        elif args.command == "list":
            for row in repository.list():
                flags = ("admin " if row.is_admin else "") + ("deleted" if row.deleted else "")
                print(f"{row.client_id}\tgeneration {row.generation}\t{flags}".rstrip())
        else:
            password = os.environ.get("GROWLER_TOKEN_KEY_PASSWORD")
            if not password:
                print("GROWLER_TOKEN_KEY_PASSWORD is not set", file=sys.stderr)
                return 2
            ttl = int(os.environ.get("GROWLER_TOKEN_TTL_S") or 3600)
            key = new_key(password)
            repository.add_signing_key(key, retire_after_s=ttl)
            print(f"new signing key {key.kid}; the previous ones verify for {ttl} s more")
    finally:
        database.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
