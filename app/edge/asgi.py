"""The ASGI entry point gunicorn serves (``app.edge.asgi:application``); settings from the environment."""

from app.edge.factory import create_app

application = create_app()
