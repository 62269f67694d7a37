/* ebb/c.h — the C API of ebb: one stable ABI under every other language.
 *
 * A plain C interface over exactly the C++ library of the headers in include/ebb/ (Runtime,
 * Session, Operation, ModelPool, ...), for C programs and for the bindings of
 * other languages (Java's dev.ebb is JNI over this header). It adds no
 * behaviour of its own: every call converts its arguments, calls the one C++
 * function it names, and converts the answer back. Release, caching, tiling,
 * budgets, eviction and recovery are the library's, so C, C++, Python and Java
 * behave the same by construction. Built as libebb.so.<EBB_ABI_VERSION>, which
 * exports the ebb_* symbols of this header and nothing else.
 *
 * CONVENTIONS (they hold for every function unless its comment says otherwise)
 *
 * Handles. Every ebb_*_t is an opaque handle, made by an ebb_*_create / load /
 * acquire call and freed by the matching ebb_*_destroy. A destroy function
 * accepts NULL and does nothing with it. A handle a function returns as
 * "borrowed" belongs to another handle and must NOT be destroyed.
 *
 * Errors. A fallible function returns an ebb_status_t*: NULL on success,
 * otherwise a status the caller owns and frees with ebb_status_destroy(), that
 * carries ebb's status code (ebb_code_t, the C++ ebb::StatusCode) and a
 * readable message. On error, out-parameters are left as NULL (pointers) or
 * untouched (values). A NULL handle or out-parameter where one is required is
 * an EBB_INVALID_ARGUMENT status naming the function and the argument, never a
 * crash. No function lets a C++ exception escape; running out of memory inside
 * the binding is EBB_RESOURCE_EXHAUSTED. Accessors that cannot fail return a
 * neutral value (0, "", NULL) for a NULL handle or an index out of range.
 *
 * Strings. Names and paths are NUL-terminated UTF-8 (const char*); JSON text,
 * model bytes and tensor data are a pointer plus a length. A `const char*`
 * returned by an accessor belongs to the handle it was read from and stays
 * valid until that handle is destroyed. Strings the caller must free are
 * returned as `char*` and freed with ebb_free().
 *
 * Tensors. Inputs are read from the caller's memory without a copy (a tensor
 * made by ebb_tensor_borrow is a view; BYTES tensors are the exception: their
 * serialised form is copied into the run). Outputs belong to the caller: each
 * output tensor owns its memory (never an ONNX Runtime arena's, which is what
 * lets the run give its arena back while the caller holds the results) and is
 * freed with ebb_tensor_destroy, or the caller passes tensors over its own
 * buffers to ebb_session_run_into, which copies the results into them.
 *
 * Threads. ebb_runtime_t, ebb_session_t and ebb_pool_t are thread-safe: any
 * function may be called on them from any number of threads at once (a run,
 * a load, a pool call may block the calling thread; none needs a particular
 * thread). ebb_tensor_t, ebb_tensors_t, ebb_memory_t, ebb_pool_snapshot_t,
 * ebb_load_options_t, ebb_pool_options_t and ebb_status_t are plain values:
 * concurrent reads are fine, a write (or destroy) must not overlap any other
 * use. An ebb_operation_t is used by one thread at a time. ebb_control_cancel
 * may be called from any thread at any time. Destroying a handle while another
 * thread still uses it is the caller's bug, as freeing memory in use is.
 *
 * Lifetimes. Handles may be destroyed in any order: a session stays valid after
 * its runtime's handle is destroyed (it keeps what it needs alive, as C++
 * sessions do), a pool and an operation keep their runtime alive, a lease keeps
 * its pool alive. Only borrowed handles end with their owner.
 *
 * One runtime per process while its policy uses the shared CPU arena (the
 * default): ebb_runtime_create fails with EBB_FAILED_PRECONDITION while another
 * such runtime (or a session of it) is alive.
 */
#ifndef EBB_C_H_
#define EBB_C_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(EBB_C_BUILDING)
#define EBB_EXPORT __declspec(dllexport)
#else
#define EBB_EXPORT __declspec(dllimport)
#endif
#else
#define EBB_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --- Versions ----------------------------------------------------------------
 * Threads: any, at any time. Ownership: returned strings are static.
 * EBB_ABI_VERSION is the soname's major number (libebb.so.1). It changes only
 * when a function of this header changes its signature or meaning, or is
 * removed; new functions are added without changing it. */
#define EBB_ABI_VERSION 1

/* The ABI version of the loaded library (compare with EBB_ABI_VERSION). */
EBB_EXPORT int ebb_abi_version(void);
/* ebb's version, "MAJOR.MINOR.PATCH" (the same string as `ebb --version`). Static storage. */
EBB_EXPORT const char* ebb_version(void);
/* The ONNX Runtime library's own version, e.g. "1.29.0". Static storage. */
EBB_EXPORT const char* ebb_ort_version(void);

/* Frees a string this API returned as `char*`. NULL is fine. */
EBB_EXPORT void ebb_free(void* p);

/* --- Status: the one error channel ------------------------------------------
 * Threads: a status is a plain value (read it from any thread; destroy it once).
 * Ownership: every status a function returns is the caller's (ebb_status_destroy). */

/* ebb::StatusCode, value for value. */
typedef enum ebb_code_t {
  EBB_OK = 0,
  EBB_INVALID_ARGUMENT = 1,    /* the caller's input is wrong (shape, type, name, file) */
  EBB_NOT_FOUND = 2,           /* a model, file or tensor name does not exist */
  EBB_RESOURCE_EXHAUSTED = 3,  /* memory ran out (arena cap, device OOM, bad_alloc) */
  EBB_UNAVAILABLE = 4,         /* a device or provider cannot be used right now */
  EBB_FAILED_PRECONDITION = 5, /* the object is not in a state that allows the call */
  EBB_CANCELLED = 6,           /* the caller asked to stop */
  EBB_INTERNAL = 7,            /* ONNX Runtime or ebb failed in an unexpected way */
  EBB_CODE_MAX_ENUM = 0x7fffffff /* not a code: keeps the type an int for every value a caller passes */
} ebb_code_t;

typedef struct ebb_status_t ebb_status_t;

/* The code of a status; EBB_OK for NULL (success). */
EBB_EXPORT ebb_code_t ebb_status_code(const ebb_status_t* status);
/* Its message; "" for NULL. Valid until the status is destroyed. */
EBB_EXPORT const char* ebb_status_message(const ebb_status_t* status);
/* A status made by the caller, for a callback to return (ebb_pool_body_fn).
 * Returns NULL for EBB_OK. The message is copied; NULL means "". */
EBB_EXPORT ebb_status_t* ebb_status_create(ebb_code_t code, const char* message);
EBB_EXPORT void ebb_status_destroy(ebb_status_t* status);
/* "ok", "invalid_argument", ..., as ebb::StatusCodeName; "unknown" out of range. Static storage. */
EBB_EXPORT const char* ebb_code_name(ebb_code_t code);

/* --- Element types and tensors ----------------------------------------------
 * Threads: a tensor may be read by any number of threads at once (several runs may
 * take it as an input); creating, writing and destroying it must not overlap any
 * other use. A tensor list is used by one thread at a time.
 * Ownership: created tensors and lists are the caller's; a borrowed tensor's data
 * stays the caller's; pointers into a tensor or list live as long as it does. */

/* ebb::DataType, value for value (names as the KServe protocol: FP32, INT64, ...). */
typedef enum ebb_dtype_t {
  EBB_BOOL = 0,
  EBB_UINT8 = 1,
  EBB_UINT16 = 2,
  EBB_UINT32 = 3,
  EBB_UINT64 = 4,
  EBB_INT8 = 5,
  EBB_INT16 = 6,
  EBB_INT32 = 7,
  EBB_INT64 = 8,
  EBB_FLOAT16 = 9,  /* IEEE half, as uint16_t bits */
  EBB_BFLOAT16 = 10, /* bfloat16, as uint16_t bits */
  EBB_FLOAT32 = 11,
  EBB_FLOAT64 = 12,
  EBB_BYTES = 13,   /* ONNX strings: see ebb_tensor_create_strings */
  EBB_DTYPE_MAX_ENUM = 0x7fffffff /* not a type (as EBB_CODE_MAX_ENUM) */
} ebb_dtype_t;

/* "FP32", "INT64", ... ("" out of range); bytes per element (0 for EBB_BYTES and out of range). */
EBB_EXPORT const char* ebb_dtype_name(ebb_dtype_t dtype);
EBB_EXPORT size_t ebb_dtype_size(ebb_dtype_t dtype);

/* A dense row-major tensor on the host (ebb::Tensor). Not thread-safe for
 * writes; a tensor must not be written while a run reads it. */
typedef struct ebb_tensor_t ebb_tensor_t;

/* A tensor of `rank` dims `shape` (all >= 0; rank 0 is a scalar) that owns
 * uninitialised memory for its elements. Not for EBB_BYTES. Every constructor
 * below checks the shape's size first (ebb::CheckedByteSize): a shape whose
 * element count or byte size passes INT64_MAX is EBB_INVALID_ARGUMENT.
 * Errors: EBB_INVALID_ARGUMENT (negative dim, a size that overflows, EBB_BYTES,
 * unknown dtype), EBB_RESOURCE_EXHAUSTED (cannot be allocated). */
EBB_EXPORT ebb_status_t* ebb_tensor_create(ebb_dtype_t dtype, const int64_t* shape, size_t rank, ebb_tensor_t** out);
/* The same, holding a copy of `data`, which must be exactly the tensor's byte size. */
EBB_EXPORT ebb_status_t* ebb_tensor_create_copy(ebb_dtype_t dtype, const int64_t* shape, size_t rank,
                                                const void* data, size_t byte_size, ebb_tensor_t** out);
/* A view of the caller's `data` (no copy): the caller keeps it alive, unchanged
 * while a run reads it, until the tensor is destroyed. ebb reads a borrowed
 * input and never writes it; only ebb_session_run_into writes into a borrowed
 * output (and ebb_tensor_mutable_data hands the pointer back).
 * Checked here: `byte_size` must equal the element count times the element
 * size and `data` must be aligned for the type (else EBB_INVALID_ARGUMENT).
 * Not for EBB_BYTES. */
EBB_EXPORT ebb_status_t* ebb_tensor_borrow(ebb_dtype_t dtype, const int64_t* shape, size_t rank, void* data,
                                           size_t byte_size, ebb_tensor_t** out);
/* An EBB_BYTES tensor of `shape` holding `values[i]` (`lengths[i]` bytes each,
 * any bytes, in row-major order); the values are copied. `count` must be the
 * element count of `shape`. */
EBB_EXPORT ebb_status_t* ebb_tensor_create_strings(const int64_t* shape, size_t rank, const char* const* values,
                                                   const size_t* lengths, size_t count, ebb_tensor_t** out);
EBB_EXPORT void ebb_tensor_destroy(ebb_tensor_t* tensor);

EBB_EXPORT ebb_dtype_t ebb_tensor_dtype(const ebb_tensor_t* tensor);
EBB_EXPORT size_t ebb_tensor_rank(const ebb_tensor_t* tensor);
/* The dims (rank of them; NULL for a scalar or a NULL tensor). Valid while the tensor lives. */
EBB_EXPORT const int64_t* ebb_tensor_shape(const ebb_tensor_t* tensor);
EBB_EXPORT int64_t ebb_tensor_element_count(const ebb_tensor_t* tensor);
/* Bytes of data (for EBB_BYTES: its serialisation, each element as a 4-byte
 * little-endian length and its bytes — the KServe binary form). */
EBB_EXPORT size_t ebb_tensor_byte_size(const ebb_tensor_t* tensor);
/* The elements, row-major. Valid while the tensor lives. */
EBB_EXPORT const void* ebb_tensor_data(const ebb_tensor_t* tensor);
EBB_EXPORT void* ebb_tensor_mutable_data(ebb_tensor_t* tensor);
/* 1 when the tensor is a view of the caller's memory (ebb_tensor_borrow), else 0. */
EBB_EXPORT int ebb_tensor_borrowed(const ebb_tensor_t* tensor);
/* Element `index` of an EBB_BYTES tensor: *data points into the tensor (valid
 * while it lives, not NUL-terminated), *length is its size.
 * Errors: EBB_INVALID_ARGUMENT (not BYTES, index out of range). */
EBB_EXPORT ebb_status_t* ebb_tensor_string(const ebb_tensor_t* tensor, size_t index, const char** data,
                                           size_t* length);
/* 1 when type, shape and every byte match (ebb::Tensor::BitwiseEquals). */
EBB_EXPORT int ebb_tensor_bitwise_equal(const ebb_tensor_t* a, const ebb_tensor_t* b);

/* A list of tensors with names: the outputs of a run (the model's output
 * names, in the order asked for) or the results of a ready-made operation
 * (one per frame, names ""). The list owns its tensors until they are taken. */
typedef struct ebb_tensors_t ebb_tensors_t;

EBB_EXPORT size_t ebb_tensors_count(const ebb_tensors_t* list);
EBB_EXPORT const char* ebb_tensors_name(const ebb_tensors_t* list, size_t index);
/* Borrowed: the tensor at `index`, owned by the list (NULL once taken). */
EBB_EXPORT const ebb_tensor_t* ebb_tensors_get(const ebb_tensors_t* list, size_t index);
/* Borrowed: the first tensor called `name`, or NULL. */
EBB_EXPORT const ebb_tensor_t* ebb_tensors_find(const ebb_tensors_t* list, const char* name);
/* Moves the tensor at `index` out of the list: the caller owns it (destroy it),
 * the list's slot becomes NULL. NULL when out of range or taken already. */
EBB_EXPORT ebb_tensor_t* ebb_tensors_take(ebb_tensors_t* list, size_t index);
/* Frees the list and every tensor not taken. */
EBB_EXPORT void ebb_tensors_destroy(ebb_tensors_t* list);

/* --- Runtime: one memory policy, one session cache (ebb::Runtime) ------------
 * Threads: every function on a runtime may be called from any number of threads at
 * once (loads and trims may block). Load options are a plain value (one writer).
 * Ownership: a runtime, each session handle a load returns and load options are the
 * caller's; a runtime keeps nothing of the options after a call. */

typedef struct ebb_runtime_t ebb_runtime_t;
typedef struct ebb_session_t ebb_session_t;

/* A runtime from a memory policy in its JSON form (docs/memory-policy.md;
 * `length` bytes of text; NULL or length 0: ebb's defaults).
 * Errors: EBB_INVALID_ARGUMENT (bad policy, naming the key),
 * EBB_FAILED_PRECONDITION (another shared-arena runtime is alive), EBB_INTERNAL. */
EBB_EXPORT ebb_status_t* ebb_runtime_create(const char* policy_json, size_t length, ebb_runtime_t** out);
/* The same from a policy file. Errors as above, and EBB_NOT_FOUND (no file). */
EBB_EXPORT ebb_status_t* ebb_runtime_create_from_file(const char* policy_path, ebb_runtime_t** out);
/* Drops this handle. Sessions, pools and operations made from it stay valid. */
EBB_EXPORT void ebb_runtime_destroy(ebb_runtime_t* runtime);
/* The policy in force as JSON, every field written (what `ebb policy` prints). */
EBB_EXPORT const char* ebb_runtime_policy_json(const ebb_runtime_t* runtime);

/* Per-load options (ebb::LoadOptions): device, strictness, name. */
typedef struct ebb_load_options_t ebb_load_options_t;
EBB_EXPORT ebb_load_options_t* ebb_load_options_create(void); /* NULL when out of memory */
EBB_EXPORT void ebb_load_options_destroy(ebb_load_options_t* options);
/* "auto" (default), "cpu", "cuda", "cuda:N". Errors: EBB_INVALID_ARGUMENT. */
EBB_EXPORT ebb_status_t* ebb_load_options_set_device(ebb_load_options_t* options, const char* device);
/* 1: fail with EBB_UNAVAILABLE when the device cannot be used; 0: fall back
 * to CPU; -1 (default): the policy's strict_device. */
EBB_EXPORT void ebb_load_options_set_strict(ebb_load_options_t* options, int strict);
/* Name for logs, errors and arenas; default: the file's folder or stem. */
EBB_EXPORT ebb_status_t* ebb_load_options_set_name(ebb_load_options_t* options, const char* name);

/* Loads (or returns the cached) session of a model file (ebb::Runtime::Load):
 * a second load of the same bytes on the same device gives the same loaded
 * model without loading again (ebb_session_same, ebb_runtime_load_count).
 * `options` may be NULL. The caller owns the new handle (ebb_session_destroy).
 * Errors: EBB_NOT_FOUND (no file), EBB_INVALID_ARGUMENT (not a model),
 * EBB_UNAVAILABLE (strict device), EBB_RESOURCE_EXHAUSTED. */
EBB_EXPORT ebb_status_t* ebb_runtime_load(ebb_runtime_t* runtime, const char* model_path,
                                          const ebb_load_options_t* options, ebb_session_t** out);
/* The same for `length` bytes of model already in memory (copied for the load). */
EBB_EXPORT ebb_status_t* ebb_runtime_load_bytes(ebb_runtime_t* runtime, const void* bytes, size_t length,
                                                const ebb_load_options_t* options, ebb_session_t** out);
/* Drops every cached session loaded from `model_path`; returns how many.
 * Handles the caller holds stay usable. */
EBB_EXPORT size_t ebb_runtime_unload_path(ebb_runtime_t* runtime, const char* model_path);
/* Drops one session from the cache; 1 if it was cached. */
EBB_EXPORT int ebb_runtime_unload_session(ebb_runtime_t* runtime, const ebb_session_t* session);
/* Drops every session from the cache. */
EBB_EXPORT void ebb_runtime_clear(ebb_runtime_t* runtime);
/* Gives idle memory back now (ebb::Runtime::Trim): the shared CPU arena is
 * shrunk (or by the last run in flight), heap pages return to the OS;
 * per-session arenas release on their next run that starts alone. */
EBB_EXPORT ebb_status_t* ebb_runtime_trim(ebb_runtime_t* runtime);
/* Successful loads so far (cache hits do not count); sessions in the cache now. */
EBB_EXPORT uint64_t ebb_runtime_load_count(const ebb_runtime_t* runtime);
EBB_EXPORT size_t ebb_runtime_cached_count(const ebb_runtime_t* runtime);

/* --- Memory readings (ebb::MemoryReading) -------------------------------------
 * Threads: reading a runtime's memory may happen on any thread, concurrently with
 * runs; a reading is a plain value. Ownership: the caller's (ebb_memory_destroy);
 * its strings live as long as it does. */

typedef struct ebb_memory_t ebb_memory_t;

/* One BFC arena's figure (ebb::ArenaStats). */
typedef enum ebb_arena_stat_t {
  EBB_ARENA_RESERVED = 0,    /* bytes held from the OS (ORT: TotalAllocated) */
  EBB_ARENA_IN_USE = 1,      /* bytes handed out to live tensors */
  EBB_ARENA_PEAK_IN_USE = 2, /* high-water mark of in_use */
  EBB_ARENA_LIMIT = 3,       /* the arena's cap */
  EBB_ARENA_REGIONS = 4,     /* live regions */
  EBB_ARENA_EXTENSIONS = 5,  /* regions ever added */
  EBB_ARENA_SHRINKS = 6,     /* regions freed by shrinks */
  EBB_ARENA_ALLOCATIONS = 7, /* allocations (ORT: NumAllocs) */
  EBB_ARENA_STAT_MAX_ENUM = 0x7fffffff /* not a figure (as EBB_CODE_MAX_ENUM) */
} ebb_arena_stat_t;

/* Reads every arena (the shared one, "cpu:shared", and each cached session's
 * own, "cpu:<model>", "gpu:N:<model>"), the process RSS and GPU memory now. */
EBB_EXPORT ebb_status_t* ebb_runtime_memory(const ebb_runtime_t* runtime, ebb_memory_t** out);
EBB_EXPORT void ebb_memory_destroy(ebb_memory_t* memory);
EBB_EXPORT int64_t ebb_memory_rss_bytes(const ebb_memory_t* memory);
EBB_EXPORT int64_t ebb_memory_peak_rss_bytes(const ebb_memory_t* memory);
/* Sum of EBB_ARENA_RESERVED over every arena. */
EBB_EXPORT int64_t ebb_memory_total_reserved(const ebb_memory_t* memory);
EBB_EXPORT size_t ebb_memory_arena_count(const ebb_memory_t* memory);
EBB_EXPORT const char* ebb_memory_arena_name(const ebb_memory_t* memory, size_t index);
/* -1 when the index or the figure is out of range. */
EBB_EXPORT int64_t ebb_memory_arena_stat(const ebb_memory_t* memory, size_t index, ebb_arena_stat_t stat);
/* The index of the arena called `name`, or -1. */
EBB_EXPORT int64_t ebb_memory_find_arena(const ebb_memory_t* memory, const char* name);
/* GPUs (empty without an NVIDIA driver): device index, total, used, free bytes (-1 out of range). */
EBB_EXPORT size_t ebb_memory_gpu_count(const ebb_memory_t* memory);
EBB_EXPORT int64_t ebb_memory_gpu(const ebb_memory_t* memory, size_t index, int64_t* total, int64_t* used,
                                  int64_t* free_bytes);
/* The whole reading as JSON (ebb::MemoryReading::ToJson). */
EBB_EXPORT const char* ebb_memory_json(const ebb_memory_t* memory);

/* --- Sessions: a loaded model and the run boundary (ebb::Session) -------------
 * Threads: every function on a session may be called from any number of threads at
 * once, runs included. Ownership: a handle is the caller's (except a lease's, which
 * is borrowed); its strings and shapes live as long as the handle; a run's inputs
 * stay the caller's, its outputs are new and the caller's. */

/* Drops this handle; the loaded model stays in the cache (ebb_runtime_unload_*). */
EBB_EXPORT void ebb_session_destroy(ebb_session_t* session);
/* A new handle on the same loaded session (the caller owns it): a session borrowed from a lease or
 * a pool's body kept beyond it. Errors: EBB_INVALID_ARGUMENT (NULL). */
EBB_EXPORT ebb_status_t* ebb_session_share(const ebb_session_t* session, ebb_session_t** out);
/* 1 when both handles hold the same loaded model: the cache gave it twice, or
 * it was loaded from two files with the same content (one load). */
EBB_EXPORT int ebb_session_same(const ebb_session_t* a, const ebb_session_t* b);
EBB_EXPORT const char* ebb_session_name(const ebb_session_t* session);
/* The model file it was loaded from ("" when loaded from bytes). */
EBB_EXPORT const char* ebb_session_source_path(const ebb_session_t* session);
/* Where it REALLY runs ("cpu", "cuda:0"), ORT's provider name, and why it runs
 * elsewhere than asked ("" when it does not). */
EBB_EXPORT const char* ebb_session_device(const ebb_session_t* session);
EBB_EXPORT const char* ebb_session_provider(const ebb_session_t* session);
EBB_EXPORT const char* ebb_session_fallback_reason(const ebb_session_t* session);

/* The signature: inputs and outputs as the model declares them. */
EBB_EXPORT size_t ebb_session_input_count(const ebb_session_t* session);
EBB_EXPORT size_t ebb_session_output_count(const ebb_session_t* session);
/* Describes input (or output) `index`: any out-pointer may be NULL; *shape has
 * *rank dims, -1 for a dynamic one; strings and shape are valid while the
 * session handle lives. Returns 1, or 0 (outs untouched) when out of range. */
EBB_EXPORT int ebb_session_input(const ebb_session_t* session, size_t index, const char** name, ebb_dtype_t* dtype,
                                 const int64_t** shape, size_t* rank);
EBB_EXPORT int ebb_session_output(const ebb_session_t* session, size_t index, const char** name, ebb_dtype_t* dtype,
                                  const int64_t** shape, size_t* rank);
/* A value of the model's metadata_props, "" when absent; free *value with ebb_free. */
EBB_EXPORT ebb_status_t* ebb_session_metadata(const ebb_session_t* session, const char* key, char** value);
/* The arena shrink entries of the session ("cpu:0", "gpu:0") as a JSON array of strings
 * (ebb::Session::release_targets); free *json with ebb_free. */
EBB_EXPORT ebb_status_t* ebb_session_release_targets(const ebb_session_t* session, char** json);
/* Runs started, runs that carried a release, runs in flight now. */
EBB_EXPORT uint64_t ebb_session_run_count(const ebb_session_t* session);
EBB_EXPORT uint64_t ebb_session_release_count(const ebb_session_t* session);
EBB_EXPORT int ebb_session_in_flight(const ebb_session_t* session);

/* Runs the model once as ONE whole operation (ebb::Session::Run with
 * ends_operation): the arena memory it grew into is given back while the model
 * stays loaded, under the policy's release mode: with the default ("idle") once
 * no run has ended for idle_release_ms (so runs called back to back keep it,
 * and a pause gives it back), with "operation_end" when the run ends. To run
 * several times and release at the last run, use an ebb_operation_t or a
 * ready-made operation.
 * inputs: `input_count` tensors named by `input_names` (every model input
 * once), read in place. output_names: the outputs to compute (`output_count`
 * of them); NULL / 0 computes all, in model order. *outputs: a new list the
 * caller owns (ebb_tensors_destroy), one tensor per output.
 * Thread-safe: any number of threads may run one session at once.
 * Errors: EBB_INVALID_ARGUMENT (unknown or missing input, wrong dtype or
 * shape, unknown output: the message names it), EBB_RESOURCE_EXHAUSTED (memory ran out: the session leaves the runtime's
 * cache, the next load builds it afresh), EBB_INTERNAL. */
EBB_EXPORT ebb_status_t* ebb_session_run(ebb_session_t* session, const char* const* input_names,
                                         const ebb_tensor_t* const* inputs, size_t input_count,
                                         const char* const* output_names, size_t output_count,
                                         ebb_tensors_t** outputs);
/* The same, writing the results into the caller's tensors `outputs` (one per
 * name of `output_names`, `output_count` of each, all required): typically
 * ebb_tensor_borrow views of the caller's buffers, whose dtype and shape must
 * equal the output's. The results are copied into them after the run.
 * Errors: as ebb_session_run, and EBB_INVALID_ARGUMENT naming an output whose
 * dtype or shape differs (the run has then happened; nothing is written into
 * that output or the ones after it). */
EBB_EXPORT ebb_status_t* ebb_session_run_into(ebb_session_t* session, const char* const* input_names,
                                              const ebb_tensor_t* const* inputs, size_t input_count,
                                              const char* const* output_names, ebb_tensor_t* const* outputs,
                                              size_t output_count);

/* --- Operations: several runs, released once (ebb::Operation) -----------------
 * Threads: an ebb_operation_t is driven by one thread at a time; ready-made
 * operations may run on several threads at once (each call is its own operation);
 * a control is set up by one thread, then ebb_control_cancel may come from any.
 * Ownership: operations, controls and results are the caller's; a control passed to
 * an operation is borrowed for the operation's life. */

/* Progress of an operation: `done` runs of `total` (0: not planned). Called on
 * the thread running the operation, after every run. Return non-zero to
 * cancel: the operation stops before its next run with EBB_CANCELLED. */
typedef int (*ebb_progress_fn)(void* user_data, int done, int total);

/* Progress and cancellation for an operation (the C++ on_progress and stop
 * token). Made and configured by one thread; ebb_control_cancel may then be
 * called from any thread. One control may serve several operations in turn;
 * once cancelled it stays cancelled. */
typedef struct ebb_control_t ebb_control_t;
typedef struct ebb_operation_t ebb_operation_t;
EBB_EXPORT ebb_control_t* ebb_control_create(void); /* NULL when out of memory */
EBB_EXPORT void ebb_control_destroy(ebb_control_t* control);
/* REQUIRES: no operation is using the control. */
EBB_EXPORT void ebb_control_set_progress(ebb_control_t* control, ebb_progress_fn fn, void* user_data);
/* Asks the operations using this control to stop before their next run. Thread-safe. */
EBB_EXPORT void ebb_control_cancel(ebb_control_t* control);
EBB_EXPORT int ebb_control_cancelled(const ebb_control_t* control);

/* An operation the caller drives run by run (ebb::ScopedOperation; what
 * Python's `with runtime.operation()` block is). planned_runs > 0: the planned last run
 * carries the release itself, as a planned C++ ebb::Operation's does (needed
 * where a trim cannot shrink an arena at once: per-session arenas, CUDA);
 * planned_runs == 0: no run releases and ebb_operation_end gives the memory
 * back (ebb::Runtime::Trim). `control` (may be NULL) is borrowed: it must
 * outlive the operation. One thread at a time. The operation keeps its runtime
 * alive. Errors: EBB_INVALID_ARGUMENT (negative planned_runs). */
EBB_EXPORT ebb_status_t* ebb_operation_create(ebb_runtime_t* runtime, int planned_runs, ebb_control_t* control,
                                              ebb_operation_t** out);
/* One run of the operation: as ebb_session_run (same arguments and errors) but
 * the arena is kept for the next run, unless this is the planned last run.
 * A failed run, or a cancellation (EBB_CANCELLED, before the run), ends the
 * operation and gives its memory back at once, as a failed ebb::Operation does.
 * Errors also: EBB_FAILED_PRECONDITION when the operation has ended or all
 * planned runs are done. */
EBB_EXPORT ebb_status_t* ebb_operation_run(ebb_operation_t* operation, ebb_session_t* session,
                                           const char* const* input_names, const ebb_tensor_t* const* inputs,
                                           size_t input_count, const char* const* output_names, size_t output_count,
                                           ebb_tensors_t** outputs);
/* Ends the operation: gives its memory back now unless a run already did (or
 * no run happened). Later calls do nothing and return NULL. */
EBB_EXPORT ebb_status_t* ebb_operation_end(ebb_operation_t* operation);
/* Ends the operation early for a failure of the caller's own (an exception
 * leaving a binding's block): its memory goes back now, and later runs fail
 * with EBB_FAILED_PRECONDITION. Nothing once it has ended. */
EBB_EXPORT void ebb_operation_abandon(ebb_operation_t* operation);
/* Ends the operation if it is still open (errors dropped), then frees it. */
EBB_EXPORT void ebb_operation_destroy(ebb_operation_t* operation);
/* Runs finished so far; whether its memory has been given back; whether it ended. */
EBB_EXPORT int ebb_operation_runs_done(const ebb_operation_t* operation);
EBB_EXPORT int ebb_operation_released(const ebb_operation_t* operation);
EBB_EXPORT int ebb_operation_ended(const ebb_operation_t* operation);

/* Ready-made operations over frames (float32 NCHW tensors [1,C,H,W], borrowed
 * for the call), each ONE operation released after its last run; a cancelled
 * or failed one gives its memory back at once. The model's first input and
 * first output are used. *results: one tensor per frame (names ""), owned by
 * the caller. `control` may be NULL. Thread-safe in the sense of the session:
 * several may run at once. Errors: the run boundary's, EBB_CANCELLED. */
/* One run per frame, in order (frames may differ in size). ebb::RunPerFrame. */
EBB_EXPORT ebb_status_t* ebb_run_per_frame(ebb_runtime_t* runtime, ebb_session_t* session,
                                           const ebb_tensor_t* const* frames, size_t frame_count,
                                           ebb_control_t* control, ebb_tensors_t** results);
/* One run over all frames stacked into a batch (equal sizes). ebb::RunJoint. */
EBB_EXPORT ebb_status_t* ebb_run_joint(ebb_runtime_t* runtime, ebb_session_t* session,
                                       const ebb_tensor_t* const* frames, size_t frame_count, ebb_control_t* control,
                                       ebb_tensors_t** results);
/* An image-to-image model over tiles (ebb::RunTiled, ebb::TileOptions): tile
 * side, overlap of context, scale (0: metadata ebb.scale, else measured),
 * tiles stacked per run. A tile covering every frame shrinks to their largest side.
 * Errors also: EBB_INVALID_ARGUMENT (tile <= 2*overlap, tile < 1, a size that
 * overflows), EBB_RESOURCE_EXHAUSTED (a batch of tiles that cannot fit the
 * shared arena's cap or memory, refused before anything is allocated). */
EBB_EXPORT ebb_status_t* ebb_run_tiled(ebb_runtime_t* runtime, ebb_session_t* session,
                                       const ebb_tensor_t* const* frames, size_t frame_count, int64_t tile,
                                       int64_t overlap, int64_t scale, int tiles_per_run, ebb_control_t* control,
                                       ebb_tensors_t** results);
/* Per frame, each model in turn; stage k's output is stage k+1's input. ebb::RunPipeline. */
EBB_EXPORT ebb_status_t* ebb_run_pipeline(ebb_runtime_t* runtime, ebb_session_t* const* stages, size_t stage_count,
                                          const ebb_tensor_t* const* frames, size_t frame_count,
                                          ebb_control_t* control, ebb_tensors_t** results);

/* --- OCR: PP-OCR's detector, angle classifier and recogniser (ebb/ocr.h) -------
 * A pipeline folder (config.json {"kind": "ocr", ...}) loaded through the
 * runtime's cache; each call is ONE operation over all its images, released
 * after its last run. Results are JSON, freed with ebb_free:
 *   [{"image": PATH (ebb_ocr_files only), "lines": [{"text": UTF-8,
 *     "confidence": 0..1, "box": [[x,y],[x,y],[x,y],[x,y]]}]}]
 * one entry per image, lines in reading order, boxes in the image's pixels
 * clockwise from the top left; an image without text has no lines.
 * Thread safety: calls on one handle may run at once. Errors: EBB_UNAVAILABLE
 * where OCR is not built (Windows); those of ebb::OcrPipeline. */
typedef struct ebb_ocr_t ebb_ocr_t;
/* `options` may be NULL. The runtime must outlive nothing: the handle keeps it. */
EBB_EXPORT ebb_status_t* ebb_ocr_load(ebb_runtime_t* runtime, const char* folder, const ebb_load_options_t* options,
                                      ebb_ocr_t** out);
EBB_EXPORT void ebb_ocr_destroy(ebb_ocr_t* ocr);
/* Image files (PNG/JPEG). A file that is not an image: EBB_INVALID_ARGUMENT naming it. */
EBB_EXPORT ebb_status_t* ebb_ocr_files(ebb_ocr_t* ocr, const char* const* paths, size_t count,
                                       ebb_control_t* control, char** json);
/* Images in memory: 8-bit interleaved rows (HWC) of channels 1 (gray), 3 (RGB)
 * or 4 (RGBA), widths[i] * heights[i] * channels[i] bytes each (copied). */
EBB_EXPORT ebb_status_t* ebb_ocr_images(ebb_ocr_t* ocr, const uint8_t* const* pixels, const int* widths,
                                        const int* heights, const int* channels, size_t count,
                                        ebb_control_t* control, char** json);

/* --- The model pool: many models within a memory budget (ebb::ModelPool) ------
 * Threads: every function on a pool may be called from any number of threads at
 * once (acquires and loads may block); a lease's session is a session (any
 * threads); a lease is destroyed once; options and snapshots are plain values.
 * Ownership: pools, leases, options and snapshots are the caller's; a lease's
 * session is borrowed from it. */

typedef struct ebb_pool_t ebb_pool_t;
typedef struct ebb_lease_t ebb_lease_t;
typedef struct ebb_pool_options_t ebb_pool_options_t;
typedef struct ebb_pool_event_t ebb_pool_event_t;
typedef struct ebb_pool_snapshot_t ebb_pool_snapshot_t;

/* ebb::PoolOptions with its defaults, but admission by memory off (see
 * ebb_pool_options_set_memory_admission); a plain value. */
EBB_EXPORT ebb_pool_options_t* ebb_pool_options_create(void); /* NULL when out of memory */
EBB_EXPORT void ebb_pool_options_destroy(ebb_pool_options_t* options);
/* CPU budget: `bytes` (0: `fraction` of physical memory; default 0, 0.75). A negative `bytes`, or a
 * `fraction` that is NaN or outside [0, 1], makes ebb_pool_create fail with EBB_INVALID_ARGUMENT (the
 * same for the CUDA budget). */
EBB_EXPORT void ebb_pool_options_set_cpu_budget(ebb_pool_options_t* options, int64_t bytes, double fraction);
/* CUDA budget per device (0: `fraction` of the device's memory; default 0, 0.9). */
EBB_EXPORT void ebb_pool_options_set_cuda_budget(ebb_pool_options_t* options, int64_t bytes, double fraction);
/* How long an acquire waits for leases to come back (default 0: fail at once). */
EBB_EXPORT void ebb_pool_options_set_wait_for_capacity_ms(ebb_pool_options_t* options, int64_t ms);
/* Default keep-alive of models and requests (-1 never unload, the default; 0 unload after each lease). */
EBB_EXPORT void ebb_pool_options_set_keep_alive_ms(ebb_pool_options_t* options, int64_t ms);
/* Admission by memory (ebb::PoolOptions::admit_by_memory; ebb/model_pool.h): on, a run given its input
 * size (ebb_pool_run_admitted) reserves its predicted need before it starts and waits, in arrival
 * order, up to `wait_ms` (0: the pool's default, a minute) for runs in flight to return theirs; a
 * model's charge is then what it holds loaded. Off (the C API's default, because
 * ebb_pool_run_with_recovery and ebb_pool_acquire carry no input size): a charge also holds the
 * largest transient peak seen, and no run waits. */
EBB_EXPORT void ebb_pool_options_set_memory_admission(ebb_pool_options_t* options, int on, int64_t wait_ms);

/* on: on_event is also called for runs that waited for memory (EBB_POOL_EVENT_WAIT); default off. */
EBB_EXPORT void ebb_pool_options_set_wait_events(ebb_pool_options_t* options, int on);

/* What the pool did (ebb::PoolEvent): loads and evictions (a run's wait for memory is not passed on). */
typedef enum ebb_pool_event_kind_t {
  EBB_POOL_EVENT_LOAD = 0,
  EBB_POOL_EVENT_EVICT = 1,
  EBB_POOL_EVENT_WAIT = 2, /* a run waited for memory: only with ebb_pool_options_set_wait_events */
  EBB_POOL_EVENT_MAX_ENUM = 0x7fffffff /* not a kind (as EBB_CODE_MAX_ENUM) */
} ebb_pool_event_kind_t;
EBB_EXPORT ebb_pool_event_kind_t ebb_pool_event_kind(const ebb_pool_event_t* event);
EBB_EXPORT const char* ebb_pool_event_model(const ebb_pool_event_t* event);
/* Load: a request needed it; how long it took. */
EBB_EXPORT int ebb_pool_event_on_demand(const ebb_pool_event_t* event);
EBB_EXPORT double ebb_pool_event_load_ms(const ebb_pool_event_t* event);
/* Evict: "budget", "keep_alive", "out_of_memory", "unload"; "" for a load. */
EBB_EXPORT const char* ebb_pool_event_reason(const ebb_pool_event_t* event);
/* Wait: how long the run waited for memory, and whether it then ran (else: deadline, cancelled). */
EBB_EXPORT double ebb_pool_event_wait_ms(const ebb_pool_event_t* event);
EBB_EXPORT int ebb_pool_event_admitted(const ebb_pool_event_t* event);
/* Called on the thread that caused the event (a caller's, or the pool's
 * keep-alive thread), outside the pool's locks; `event` is valid during the
 * call only. It must not call ebb_pool_destroy; it may destroy a lease, the
 * pool's last one too (the pool then goes on a thread of its own). */
typedef void (*ebb_pool_event_fn)(void* user_data, const ebb_pool_event_t* event);

/* A pool over `runtime` (kept alive by the pool). `options` may be NULL
 * (defaults) and is copied; `on_event` may be NULL; `user_data` must stay
 * valid until the pool is gone (ebb_pool_destroy, and every lease of it). */
EBB_EXPORT ebb_status_t* ebb_pool_create(ebb_runtime_t* runtime, const ebb_pool_options_t* options,
                                         ebb_pool_event_fn on_event, void* user_data, ebb_pool_t** out);
/* Drops the handle; the pool goes away with its last lease (its keep-alive thread is joined then). */
EBB_EXPORT void ebb_pool_destroy(ebb_pool_t* pool);
/* Registers a model, or updates its spec (taking effect at its next load).
 * `load` may be NULL (device auto; its name is replaced by `name`). pinned:
 * never evicted. keep_alive_ms: NULL for the pool's default. */
EBB_EXPORT ebb_status_t* ebb_pool_add(ebb_pool_t* pool, const char* name, const char* model_path,
                                      const ebb_load_options_t* load, int pinned, const int64_t* keep_alive_ms);
EBB_EXPORT int ebb_pool_contains(const ebb_pool_t* pool, const char* name);
/* The model, loaded on demand (evicting idle models to fit), held until the
 * lease is destroyed. keep_alive_ms: NULL for the model's. The caller owns the lease.
 * Errors: EBB_NOT_FOUND (unknown), EBB_UNAVAILABLE (not loaded and
 * load_on_demand 0), EBB_RESOURCE_EXHAUSTED (cannot fit), load errors. */
EBB_EXPORT ebb_status_t* ebb_pool_acquire(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                          int load_on_demand, ebb_lease_t** out);
/* Borrowed: the leased session, valid until the lease is destroyed. */
EBB_EXPORT ebb_session_t* ebb_lease_session(const ebb_lease_t* lease);
EBB_EXPORT const char* ebb_lease_name(const ebb_lease_t* lease);
/* Gives the model back (its keep-alive applies from now; 0 unloads it now). */
EBB_EXPORT void ebb_lease_destroy(ebb_lease_t* lease);
/* The body of ebb_pool_run_with_recovery: runs on the caller's thread with
 * the model held; `session` is borrowed for the call: it is freed when the
 * body returns, so every use of it, on any thread, must have ended by then
 * (the Java binding waits for them). Returns NULL or a status
 * (ebb_status_create, or one an ebb call returned), which the pool takes over. */
typedef ebb_status_t* (*ebb_pool_body_fn)(void* user_data, ebb_session_t* session);
/* Calls `body` with the model held; if it returns EBB_RESOURCE_EXHAUSTED, the
 * broken session and every idle model are evicted, memory is trimmed, and
 * `body` runs once more on a fresh load. Returns body's last status. */
EBB_EXPORT ebb_status_t* ebb_pool_run_with_recovery(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                                    int load_on_demand, ebb_pool_body_fn body, void* user_data);
/* As ebb_pool_run_with_recovery, for one run (or operation) whose inputs hold `run_elements`
 * elements in all (the sum of ebb_tensor_element_count over them). With admission by memory on
 * (ebb_pool_options_set_memory_admission), its predicted need is reserved before `body` runs and
 * returned after it; the first run of a model runs alone to be measured; an out-of-memory failure is
 * retried once, alone, after the runs in flight drain. Errors besides body's: EBB_RESOURCE_EXHAUSTED
 * at once for a run predicted larger than the device allows even alone (the message gives both
 * numbers), EBB_UNAVAILABLE when its wait for memory passed the deadline. With admission off it is
 * ebb_pool_run_with_recovery. run_elements < 0: EBB_INVALID_ARGUMENT. */
EBB_EXPORT ebb_status_t* ebb_pool_run_admitted(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                               int load_on_demand, int64_t run_elements, ebb_pool_body_fn body,
                                               void* user_data);
/* ebb_pool_acquire and ebb_pool_run_admitted with every ebb::AcquireOptions: run_elements < 0
 * reserves nothing (the lease is not for one run); timeout_ms < 0 waits the pool's
 * wait_for_memory, else at most timeout_ms for memory (then EBB_UNAVAILABLE). */
EBB_EXPORT ebb_status_t* ebb_pool_acquire_for_run(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                                  int load_on_demand, int64_t run_elements, int64_t timeout_ms,
                                                  ebb_lease_t** out);
EBB_EXPORT ebb_status_t* ebb_pool_run_within(ebb_pool_t* pool, const char* name, const int64_t* keep_alive_ms,
                                             int load_on_demand, int64_t run_elements, int64_t timeout_ms,
                                             ebb_pool_body_fn body, void* user_data);
/* Loads a model now (kept loaded until a request applies its keep-alive);
 * unloads one (pinned too); unloads and forgets one. Errors: EBB_NOT_FOUND, load errors. */
EBB_EXPORT ebb_status_t* ebb_pool_load(ebb_pool_t* pool, const char* name);
EBB_EXPORT ebb_status_t* ebb_pool_unload(ebb_pool_t* pool, const char* name);
EBB_EXPORT ebb_status_t* ebb_pool_remove(ebb_pool_t* pool, const char* name);
/* Unloads idle models whose keep-alive ran out (the pool's thread does too). */
EBB_EXPORT void ebb_pool_reap_now(ebb_pool_t* pool);
/* Budget and charges in use on a device ("cpu", "cuda:0"); budget 0 = none. */
EBB_EXPORT int64_t ebb_pool_budget(const ebb_pool_t* pool, const char* device);
EBB_EXPORT int64_t ebb_pool_used(const ebb_pool_t* pool, const char* device);

/* Model states (ebb::PoolState): "UNAVAILABLE", "LOADING", "READY". */
typedef enum ebb_pool_state_t {
  EBB_POOL_UNLOADED = 0,
  EBB_POOL_LOADING = 1,
  EBB_POOL_READY = 2,
  EBB_POOL_STATE_MAX_ENUM = 0x7fffffff /* not a state (as EBB_CODE_MAX_ENUM) */
} ebb_pool_state_t;
EBB_EXPORT const char* ebb_pool_state_name(ebb_pool_state_t state);
/* The status of one model (a snapshot of one entry), or of every model. Never
 * loads, touches LRU order or evicts. Errors: EBB_NOT_FOUND (unknown model). */
EBB_EXPORT ebb_status_t* ebb_pool_status(const ebb_pool_t* pool, const char* name, ebb_pool_snapshot_t** out);
EBB_EXPORT ebb_status_t* ebb_pool_snapshot(const ebb_pool_t* pool, ebb_pool_snapshot_t** out);
EBB_EXPORT void ebb_pool_snapshot_destroy(ebb_pool_snapshot_t* snapshot);
/* Entry `index` (ebb::ModelStatus); neutral values out of range. */
EBB_EXPORT size_t ebb_pool_snapshot_count(const ebb_pool_snapshot_t* snapshot);
EBB_EXPORT const char* ebb_pool_snapshot_name(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT ebb_pool_state_t ebb_pool_snapshot_state(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT const char* ebb_pool_snapshot_device(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT const char* ebb_pool_snapshot_reason(const ebb_pool_snapshot_t* snapshot, size_t index);
/* Charge (max(load + transient, file size)), measured load bytes, largest transient peak. */
EBB_EXPORT int64_t ebb_pool_snapshot_charge_bytes(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT int64_t ebb_pool_snapshot_load_bytes(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT int64_t ebb_pool_snapshot_transient_bytes(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT int ebb_pool_snapshot_in_flight(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT int ebb_pool_snapshot_pinned(const ebb_pool_snapshot_t* snapshot, size_t index);
EBB_EXPORT uint64_t ebb_pool_snapshot_loads(const ebb_pool_snapshot_t* snapshot, size_t index);
/* Entry `index` as JSON with every field of ebb::ModelStatus (the above, "need_points" and
 * "arena_need_points" as [[input_elements, bytes], ...], "last_run_elements", "last_need_bytes",
 * "last_arena_need_bytes", "reserved_bytes", "waiting_for_memory", "out_of_memory"); free it with
 * ebb_free. NULL out of range or out of memory. */
EBB_EXPORT char* ebb_pool_snapshot_json(const ebb_pool_snapshot_t* snapshot, size_t index);
/* What a run of `input_elements` is predicted to need (ebb::ModelPool::PredictNeed) as JSON
 * {"memory_bytes", "arena_bytes", "memory_at_least", "arena_at_least"}, or "null" before the model
 * was measured; free *json with ebb_free. Errors: EBB_NOT_FOUND, EBB_INVALID_ARGUMENT. */
EBB_EXPORT ebb_status_t* ebb_pool_predict_need_json(const ebb_pool_t* pool, const char* name, int64_t input_elements,
                                                    char** json);
/* Admission by memory per device (ebb::DeviceAdmission) as a JSON array of objects with its
 * fields by name ("device", "memory_limit_bytes", "reserved_bytes", ...); free with ebb_free. */
EBB_EXPORT char* ebb_pool_admission_json(const ebb_pool_t* pool);

/* --- Models as a person names them (ebb/model_location.h, ebb/model_config.h) --
 * Threads: any (they read the file system only; nothing is loaded).
 * Ownership: returned strings are the caller's (ebb_free). */

/* Resolves `model` the way the `ebb` command takes it: a model folder (its model.onnx), a model
 * file, or a bare name looked up under `models_dir` (NULL: "models"). `models_dir_origin` names
 * where that folder came from in errors (NULL: "the models folder"). *model_path: the file to load;
 * *device: `requested_device` (NULL: "auto") unless it is "auto", else the folder config's "device",
 * else "auto" (ebb::DeviceFor). Errors: EBB_NOT_FOUND (no such file or folder, a folder without
 * model.onnx), EBB_INVALID_ARGUMENT (empty, neither file nor folder, a broken config.json). */
EBB_EXPORT ebb_status_t* ebb_model_resolve(const char* model, const char* models_dir, const char* models_dir_origin,
                                           const char* requested_device, char** model_path, char** device);
/* The config.json of a model folder as ebb reads it (ebb::LoadModelConfig, strict, confined to the
 * folder), written back as JSON with every field it has (ebb::ModelConfigToJson); a folder without
 * one gives the defaults. Errors: EBB_INVALID_ARGUMENT (unknown key, bad value, a link out of the
 * folder, too large), EBB_NOT_FOUND. */
EBB_EXPORT ebb_status_t* ebb_model_config_json(const char* folder, char** json);

/* --- Images (ebb/image.h) --------------------------------------------------------
 * An image is an EBB_UINT8 tensor [H,W,C] (C = 1 gray, 3 RGB, 4 RGBA); [H,W] is taken as gray.
 * Threads: any. Ownership: new tensors are the caller's; arguments are read only. */

/* Reads a PNG or JPEG file (by its magic bytes) into a new UINT8 [H,W,C] tensor (ebb::ReadImage).
 * Errors: EBB_NOT_FOUND, EBB_INVALID_ARGUMENT (corrupt, truncated or unsupported file). */
EBB_EXPORT ebb_status_t* ebb_image_read(const char* path, ebb_tensor_t** out);
/* Writes an 8-bit PNG (ebb::WritePng): `image` is a UINT8 image as above, or a FLOAT32 tensor
 * [1,C,H,W] / [C,H,W] with values in [0,1] (clamped, x255, rounded: ebb::TensorToImage).
 * Errors: EBB_INVALID_ARGUMENT (another type or shape), EBB_INTERNAL (cannot write). */
EBB_EXPORT ebb_status_t* ebb_image_write_png(const char* path, const ebb_tensor_t* image);
/* UINT8 image -> new FLOAT32 [1,C,H,W] tensor, values v/255 (ebb::ImageToTensor; channels 1, 3, 4). */
EBB_EXPORT ebb_status_t* ebb_image_to_tensor(const ebb_tensor_t* image, int channels, ebb_tensor_t** out);
/* FLOAT32 [1,C,H,W] / [C,H,W] in [0,1] -> new UINT8 [H,W,C] image (ebb::TensorToImage). */
EBB_EXPORT ebb_status_t* ebb_tensor_to_image(const ebb_tensor_t* tensor, ebb_tensor_t** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EBB_C_H_ */
