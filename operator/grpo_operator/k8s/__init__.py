"""The operator's API client, one module per concern: who we are (credentials), how requests
travel (transport: proxy, in-flight limit) and what we ask (api: the REST verbs)."""

from .api import Api, ApiError
from .credentials import Credentials
from .transport import Slots, proxy_for

__all__ = ["Api", "ApiError", "Credentials", "Slots", "proxy_for"]
