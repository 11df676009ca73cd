/* libpsm2.so.2 for pods without Omni-Path, installed in /usr/local/lib/x86_64-linux-gnu so the loader
 * prefers it to Debian's libpsm2-2, which stays installed.
 *
 * libmpi and libfabric link libpsm2 directly, and its constructor measures the CPU clock for 100 ms in
 * every process that loads it, pinned to CPU 0 (init_picos_per_cycle, opa-psm2 opa/opa_time.c): every
 * MPI rank paid it at start. This stand-in exports the same PSM2_1.0 functions (both libraries bind all
 * of them at load), has no constructor, and answers every call with PSM2_EP_NO_DEVICE, as libpsm2 does on
 * a host without an hfi1 device; OpenMPI's mtl/psm2 and libfabric's psm2 provider then stand aside.
 * A site with Omni-Path sets LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu in its jobs (docs/mpi-and-ports.md).
 * Ref: psm2.h (opa-psm2), psm2_error_t; https://docs.open-mpi.org/en/v5.0.x/tuning-apps/networking/omnipath.html
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PSM2_EP_NO_DEVICE 21 /* psm2.h, psm2_error_t */

#define NO_DEVICE(name) \
    int name(void);     \
    int name(void) { return PSM2_EP_NO_DEVICE; }

NO_DEVICE(psm2_init)
NO_DEVICE(psm2_finalize)
NO_DEVICE(psm2_error_register_handler)
NO_DEVICE(psm2_error_defer)
NO_DEVICE(psm2_info_query)
NO_DEVICE(psm2_getopt)
NO_DEVICE(psm2_setopt)
NO_DEVICE(psm2_poll)
NO_DEVICE(psm2_map_nid_hostname)
NO_DEVICE(psm2_ep_open)
NO_DEVICE(psm2_ep_open_opts_get_defaults)
NO_DEVICE(psm2_ep_close)
NO_DEVICE(psm2_ep_connect)
NO_DEVICE(psm2_ep_disconnect)
NO_DEVICE(psm2_ep_disconnect2)
NO_DEVICE(psm2_ep_epid_lookup)
NO_DEVICE(psm2_ep_epid_lookup2)
NO_DEVICE(psm2_ep_epid_share_memory)
NO_DEVICE(psm2_ep_num_devunits)
NO_DEVICE(psm2_ep_query)
NO_DEVICE(psm2_epaddr_setctxt)
NO_DEVICE(psm2_epaddr_to_epid)
NO_DEVICE(psm2_am_get_parameters)
NO_DEVICE(psm2_am_get_source)
NO_DEVICE(psm2_am_register_handlers)
NO_DEVICE(psm2_am_register_handlers_2)
NO_DEVICE(psm2_am_reply_short)
NO_DEVICE(psm2_am_request_short)
NO_DEVICE(psm2_am_unregister_handlers)
NO_DEVICE(psm2_mq_init)
NO_DEVICE(psm2_mq_finalize)
NO_DEVICE(psm2_mq_cancel)
NO_DEVICE(psm2_mq_fp_msg)
NO_DEVICE(psm2_mq_get_stats)
NO_DEVICE(psm2_mq_getopt)
NO_DEVICE(psm2_mq_setopt)
NO_DEVICE(psm2_mq_improbe)
NO_DEVICE(psm2_mq_improbe2)
NO_DEVICE(psm2_mq_imrecv)
NO_DEVICE(psm2_mq_ipeek)
NO_DEVICE(psm2_mq_ipeek2)
NO_DEVICE(psm2_mq_ipeek_dequeue)
NO_DEVICE(psm2_mq_ipeek_dequeue_multi)
NO_DEVICE(psm2_mq_iprobe)
NO_DEVICE(psm2_mq_iprobe2)
NO_DEVICE(psm2_mq_irecv)
NO_DEVICE(psm2_mq_irecv2)
NO_DEVICE(psm2_mq_isend)
NO_DEVICE(psm2_mq_isend2)
NO_DEVICE(psm2_mq_req_free)
NO_DEVICE(psm2_mq_send)
NO_DEVICE(psm2_mq_send2)
NO_DEVICE(psm2_mq_test)
NO_DEVICE(psm2_mq_test2)
NO_DEVICE(psm2_mq_wait)
NO_DEVICE(psm2_mq_wait2)

uint64_t psm2_capabilities_bitset = 0;

const char *psm2_error_get_string(int error);
const char *psm2_error_get_string(int error)
{
    (void)error;
    return "no Omni-Path device (libpsm2 stand-in; docs/mpi-and-ports.md)";
}

uint64_t psm2_get_capability_mask(uint64_t req_cap_mask);
uint64_t psm2_get_capability_mask(uint64_t req_cap_mask)
{
    (void)req_cap_mask;
    return 0;
}

uint64_t psm2_epid_nid(uint64_t epid);
uint64_t psm2_epid_nid(uint64_t epid) { return (void)epid, 0; }
uint64_t psm2_epid_context(uint64_t epid);
uint64_t psm2_epid_context(uint64_t epid) { return (void)epid, 0; }
uint64_t psm2_epid_port(uint64_t epid);
uint64_t psm2_epid_port(uint64_t epid) { return (void)epid, 0; }

void *psm2_epaddr_getctxt(void *epaddr);
void *psm2_epaddr_getctxt(void *epaddr) { return (void)epaddr, NULL; }
void psm2_epaddr_setlabel(void *epaddr, const char *label);
void psm2_epaddr_setlabel(void *epaddr, const char *label) { (void)epaddr, (void)label; }

void psm2_uuid_generate(unsigned char uuid_out[16]);
void psm2_uuid_generate(unsigned char uuid_out[16]) { memset(uuid_out, 0, 16); }
