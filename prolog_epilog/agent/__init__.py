"""The worker's resident health agent: it holds NVML open, runs the periodic checks on its own schedule,
and answers the hooks (prolog, epilog, healthcheck) over a local Unix socket.

    protocol  the wire format: one JSON request line, one JSON answer line, parsed strictly
    state     the latest verdict of each check, with its time
    server    the socket: who may ask (SO_PEERCRED), one deadline per request
    daemon    the agent itself: NVML, the schedule, the answers
    client    what the hooks call; any failure means "run the checks yourself"
"""
