#!/usr/bin/env bash
# Certificates and keys of the local cluster, made with openssl: a CA, the API server's serving
# certificate (for its bridge address, the `kubernetes` Service's ClusterIP and the names pods use), the
# client certificate the API server shows the kubelet, and the ServiceAccount token signing key.
# Idempotent: an existing CA is kept. Ref: https://kubernetes.io/docs/setup/best-practices/certificates/
#
# Usage: make-pki.sh DIR API_ADDRESS API_SERVICE_IP CLUSTER_DOMAIN
set -euo pipefail
dir=${1:?usage: make-pki.sh DIR API_ADDRESS API_SERVICE_IP CLUSTER_DOMAIN}
api_ip=${2:?}; svc_ip=${3:?}; domain=${4:?}
[ -f "$dir/sa.pub" ] && exit 0
mkdir -p "$dir"
cd "$dir"
umask 077
days=30
# The extensions a strict verifier requires (Python 3.13's default ssl context: VERIFY_X509_STRICT).
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days "$days" \
    -subj "/CN=slurmpod-k8s-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -addext "subjectKeyIdentifier=hash" 2>/dev/null
sign() {  # NAME SUBJECT EXTENSIONS
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    printf '%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n' "$3" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days "$days" \
        -extfile "$1.ext" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
sign apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:$api_ip,IP:$svc_ip,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$domain
extendedKeyUsage=serverAuth"
# O=system:masters: the kubelet's webhook authorization allows the API server's exec/logs requests.
sign kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
chmod 644 ca.crt
