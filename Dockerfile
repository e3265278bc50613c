# One image for the servers (mpc-party), the clients (mpc-client) and the key tool (mpc-certs).
# docs/operations.md, "Containers", says how to build and run it; .dockerignore keeps the
# virtual environment, keys and data of the clone out of the build context.
FROM python:3.11-slim

WORKDIR /tmp/mpcnet
COPY pyproject.toml setup.py MANIFEST.in README.md CHANGELOG.md ./
COPY mpcnet ./mpcnet
COPY parties ./parties
COPY client ./client
COPY certs ./certs
COPY data ./data
# Installed into a virtual environment of its own (a distribution's Python may refuse a bare
# pip install). A C compiler only for the build of the Z_2^128 loops (mpcnet/_ring128.c),
# removed after it, as is the source (the installed package is the only copy). The servers'
# data volumes are mounted on /var/lib/mpcnet, which the image creates owned by the
# unprivileged user, so that a new named volume starts out writable by it.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir . \
    && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
    && cd / && rm -rf /tmp/mpcnet \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /var/lib/mpcnet \
       --shell /usr/sbin/nologin mpc \
    && install -d -o mpc -g mpc -m 0700 /var/lib/mpcnet \
    && install -d -m 0755 /etc/mpcnet
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /var/lib/mpcnet

# Servers run as this user (uid 10001): its key must be readable by that uid, and its data
# volume is created owned by it. Client containers may run as the host user (MPC_UID).
USER mpc
EXPOSE 7101 7102 7103 7104
CMD ["mpc-party", "--help"]
