"""The operator's API client, one module per concern: who we are (credentials), how requests
travel (transport: proxy, in-flight limit) and what we ask (api: the REST verbs)."""

from .api import Api, ApiError, NotLeaderError
from .credentials import Credentials
from .leader import Leader, LeaseTerms
from .transport import Slots, proxy_for

__all__ = ["Api", "ApiError", "Credentials", "Leader", "LeaseTerms", "NotLeaderError", "Slots", "proxy_for"]
