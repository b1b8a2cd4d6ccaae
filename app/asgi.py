"""The ASGI entry point gunicorn serves (``app.asgi:application``); settings from the environment."""

from app.factory import create_app

application = create_app()
