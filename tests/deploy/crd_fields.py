"""The fields ebb's manifests under deploy/ may use, written from the published CRDs (field names and
types only), and a walker that checks a manifest against them.

Sources (read in the projects' repositories, not copied):
- KServe `config/crd/full/serving.kserve.io_clusterservingruntimes.yaml` and `..._servingruntimes.yaml`:
  kind ClusterServingRuntime / ServingRuntime, group serving.kserve.io, version v1alpha1 (KServe 0.20).
- KServe `config/crd/full/serving.kserve.io_inferenceservices.yaml`: kind InferenceService, version v1beta1.
- ModelMesh Serving `config/crd/bases/serving.kserve.io_servingruntimes.yaml`: its ServingRuntime, v1alpha1
  (a subset of KServe's: no `priority` in supportedModelFormats, no `workerSpec`), and its
  `controllers/servingruntime_validator.go` for the rules MODELMESH_RULES states.
- `containers[]` of a ServingRuntime is a core/v1 Container (Kubernetes API), and so are its probes,
  ports, env and resources as the CRDs embed them.

A schema is one of: a type name ("string", "integer", "boolean", "quantity" — a string or an integer,
"int-or-string"), a dict of the allowed keys (each key: its schema), {"*": schema} for a map with free
string keys, or [schema] for a list.
"""

# --- core/v1 (embedded by the serving.kserve.io CRDs) ----------------------------------------------

HTTP_GET = {  # core/v1 HTTPGetAction
    "path": "string", "port": "int-or-string", "scheme": "string", "host": "string",
    "httpHeaders": [{"name": "string", "value": "string"}],
}
PROBE = {  # core/v1 Probe
    "httpGet": HTTP_GET,
    "exec": {"command": ["string"]},
    "grpc": {"port": "integer", "service": "string"},
    "tcpSocket": {"port": "int-or-string", "host": "string"},
    "initialDelaySeconds": "integer", "periodSeconds": "integer", "timeoutSeconds": "integer",
    "successThreshold": "integer", "failureThreshold": "integer", "terminationGracePeriodSeconds": "integer",
}
RESOURCES = {  # core/v1 ResourceRequirements
    "requests": {"*": "quantity"},
    "limits": {"*": "quantity"},
}
ENV_VAR = {  # core/v1 EnvVar (valueFrom: EnvVarSource)
    "name": "string",
    "value": "string",
    "valueFrom": {
        "resourceFieldRef": {"containerName": "string", "resource": "string", "divisor": "quantity"},
        "fieldRef": {"fieldPath": "string", "apiVersion": "string"},
    },
}
CONTAINER_PORT = {  # core/v1 ContainerPort
    "containerPort": "integer", "name": "string", "protocol": "string", "hostPort": "integer", "hostIP": "string",
}
SECURITY_CONTEXT = {  # core/v1 SecurityContext
    "runAsUser": "integer", "runAsGroup": "integer", "runAsNonRoot": "boolean",
    "allowPrivilegeEscalation": "boolean", "privileged": "boolean", "readOnlyRootFilesystem": "boolean",
    "capabilities": {"add": ["string"], "drop": ["string"]},
    "seccompProfile": {"type": "string", "localhostProfile": "string"},
}
CONTAINER = {  # core/v1 Container, as spec.containers[] of both ServingRuntime CRDs
    "name": "string", "image": "string", "imagePullPolicy": "string", "command": ["string"], "args": ["string"],
    "env": [ENV_VAR], "ports": [CONTAINER_PORT], "resources": RESOURCES, "workingDir": "string",
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE, "securityContext": SECURITY_CONTEXT,
}
METADATA = {  # meta/v1 ObjectMeta
    "name": "string", "namespace": "string", "labels": {"*": "string"}, "annotations": {"*": "string"},
}

# --- serving.kserve.io/v1alpha1 ServingRuntimeSpec -------------------------------------------------

_SUPPORTED_MODEL_FORMAT = {"name": "string", "version": "string", "autoSelect": "boolean", "priority": "integer"}
_RUNTIME_SPEC = {
    "supportedModelFormats": [_SUPPORTED_MODEL_FORMAT],
    "protocolVersions": ["string"],
    "multiModel": "boolean",
    "disabled": "boolean",
    "grpcEndpoint": "string",
    "grpcDataEndpoint": "string",
    "httpDataEndpoint": "string",
    "containers": [CONTAINER],
    "annotations": {"*": "string"},  # the pods' annotations (ServingRuntimePodSpec)
    "labels": {"*": "string"},
    "replicas": "integer",
    "nodeSelector": {"*": "string"},
    "storageHelper": {"disabled": "boolean"},
}

CLUSTER_SERVING_RUNTIME = {  # KServe serving.kserve.io_clusterservingruntimes.yaml, v1alpha1
    "apiVersion": "string", "kind": "string", "metadata": METADATA, "spec": _RUNTIME_SPEC,
}

MODELMESH_SERVING_RUNTIME = {  # ModelMesh Serving serving.kserve.io_servingruntimes.yaml, v1alpha1
    "apiVersion": "string", "kind": "string", "metadata": METADATA,
    "spec": {**_RUNTIME_SPEC,
             "supportedModelFormats": [{k: v for k, v in _SUPPORTED_MODEL_FORMAT.items() if k != "priority"}]},
}

# --- serving.kserve.io/v1beta1 InferenceService ----------------------------------------------------

_MODEL_SPEC = {  # PredictorSpec.model: ModelSpec
    "modelFormat": {"name": "string", "version": "string"},
    "runtime": "string",
    "storageUri": "string",
    "storage": {"key": "string", "path": "string", "schemaPath": "string", "parameters": {"*": "string"}},
    "protocolVersion": "string",
    "resources": RESOURCES,
    "args": ["string"],
    "env": [ENV_VAR],
    "ports": [CONTAINER_PORT],
}
INFERENCE_SERVICE = {  # KServe serving.kserve.io_inferenceservices.yaml, v1beta1
    "apiVersion": "string", "kind": "string", "metadata": METADATA,
    "spec": {"predictor": {
        "model": _MODEL_SPEC,
        "minReplicas": "integer",
        "maxReplicas": "integer",
        "scaleMetric": "string",   # enum: cpu, memory, concurrency, rps
        "scaleTarget": "integer",
        "annotations": {"*": "string"},
        "labels": {"*": "string"},
    }},
}

# Values the CRDs constrain (enums in the CRDs, or the values KServe's code compares against).
ENUMS = {
    "spec.predictor.scaleMetric": {"cpu", "memory", "concurrency", "rps"},
    "spec.protocolVersions[]": {"v1", "v2", "grpc-v1", "grpc-v2"},   # KServe constants.InferenceServiceProtocol
    "spec.predictor.model.protocolVersion": {"v1", "v2", "grpc-v1", "grpc-v2"},
}

# ModelMesh Serving's ServingRuntime validator (controllers/servingruntime_validator.go): model-mesh
# manages the runtime pod's readiness, and these belong to the containers it injects.
MODELMESH_RULES = {
    "reserved_ports": {8080, 8085, 8089, 8090},   # 8080: model-mesh's LiteLinks; 8085: built-in adapter
    "reserved_port_names": {"grpc", "http", "prometheus"},
    "reserved_container_names": {"mm", "rest-proxy", "puller"},
    "reserved_prefix": "mm-",
    "forbidden_container_fields": {"readinessProbe", "lifecycle"},
}

# --- the walker ------------------------------------------------------------------------------------


def _type_ok(kind, value):
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("quantity", "int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    raise ValueError(f"unknown type {kind}")


def check(document, schema, path=""):
    """Every problem of `document` against `schema`, as "path: reason" strings (empty: it conforms)."""
    problems = []
    if isinstance(schema, str):
        if not _type_ok(schema, document):
            problems.append(f"{path or '.'}: {document!r} is not a {schema}")
    elif isinstance(schema, list):
        if not isinstance(document, list):
            return [f"{path}: not a list"]
        for i, item in enumerate(document):
            problems += check(item, schema[0], f"{path}[{i}]")
    elif isinstance(schema, dict):
        if not isinstance(document, dict):
            return [f"{path}: not an object"]
        for key, value in document.items():
            sub = schema.get(key, schema.get("*"))
            where = f"{path}.{key}" if path else str(key)
            if sub is None:
                problems.append(f"{where}: not a field of the CRD")
            else:
                problems += check(value, sub, where)
    return problems


def values_at(document, dotted):
    """The values at a path such as "spec.protocolVersions[]" ("[]": every item of a list)."""
    values = [document]
    for part in dotted.split("."):
        each = part.endswith("[]")
        key = part[:-2] if each else part
        values = [v[key] for v in values if isinstance(v, dict) and key in v]
        if each:
            values = [item for v in values for item in v]
    return values
