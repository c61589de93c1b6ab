/* run_spv: load an `iron build` SPIR-V artifact and its manifest, run it through Vulkan, check it -- no Python.
 *
 *   iron build iron.std.unary:iron_exp --backend vulkan --dtype f32 --out build
 *   cc -std=c99 -O2 -o run_spv run_spv.c -lvulkan -lm
 *   ./run_spv build [iron_exp_f32.spv [N]]
 *
 * Everything about the launch comes from build/manifest.txt (one `key value...` per line, see README.md): the entry
 * point, which descriptor binding each buffer argument has, the push-constant layout (the exact grid size
 * iron_n0..2) and the specialization ids of the group size. The kernel must be elementwise out[i] = f(a[i]) on
 * f32 buffers; the result is checked against libm's exp. Exit status: 0 all match, 1 mismatch, 2 setup error.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define MAX_ARGS 16
#define MAX_PUSH 16
#define GROUP 64u /* any group size works: the module reads it from spec constants, the grid guard handles the tail */

typedef struct { char name[64], kind[16], dtype[16], access[16]; int binding; } Arg;
typedef struct { char name[64], dtype[16]; int offset; } Push;
typedef struct {
    char entry[128];
    char backend[32];
    Arg args[MAX_ARGS];
    int nargs;
    Push push[MAX_PUSH];
    int npush, push_size, spec_ids[3], nfeatures;
} Artifact;

static void die(const char *what) {
    fprintf(stderr, "run_spv: %s\n", what);
    exit(2);
}

static void check(VkResult r, const char *call) {
    if (r != VK_SUCCESS) {
        fprintf(stderr, "run_spv: %s failed (VkResult %d)\n", call, (int)r);
        exit(2);
    }
}

/* Find the `artifact FILE` ... `end` block of manifest.txt and read the keys the launch needs. */
static int read_manifest(const char *path, const char *file, Artifact *a) {
    FILE *f = fopen(path, "r");
    char line[512], key[64];
    int in_block = 0, found = 0;
    if (!f) return 0;
    memset(a, 0, sizeof *a);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%63s", key) != 1) continue;
        if (!in_block) {
            char name[256];
            if (strcmp(key, "artifact") == 0 && sscanf(line, "%*s %255s", name) == 1 && strcmp(name, file) == 0)
                in_block = found = 1;
            continue;
        }
        if (strcmp(key, "end") == 0) break;
        if (strcmp(key, "entry") == 0) sscanf(line, "%*s %127s", a->entry);
        else if (strcmp(key, "backend") == 0) sscanf(line, "%*s %31s", a->backend);
        else if (strcmp(key, "push_size") == 0) sscanf(line, "%*s %d", &a->push_size);
        else if (strcmp(key, "spec_ids") == 0)
            sscanf(line, "%*s %d %d %d", &a->spec_ids[0], &a->spec_ids[1], &a->spec_ids[2]);
        else if (strcmp(key, "feature") == 0) a->nfeatures++;
        else if (strcmp(key, "arg") == 0 && a->nargs < MAX_ARGS) {
            Arg *g = &a->args[a->nargs++];
            g->binding = -1;
            sscanf(line, "%*s %63s %15s %15s %15s binding %d", g->name, g->kind, g->dtype, g->access, &g->binding);
        } else if (strcmp(key, "push") == 0 && a->npush < MAX_PUSH) {
            Push *p = &a->push[a->npush++];
            sscanf(line, "%*s %63s %d %15s", p->name, &p->offset, p->dtype);
        }
    }
    fclose(f);
    return found;
}

static uint32_t *read_spirv(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    uint32_t *words;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    words = malloc((size_t)n);
    if (n < 20 || n % 4 || fread(words, 1, (size_t)n, f) != (size_t)n || words[0] != 0x07230203u) {
        free(words);
        words = NULL;
    }
    fclose(f);
    *bytes = (size_t)n;
    return words;
}

static uint32_t memory_type(VkPhysicalDevice pd, uint32_t bits, VkMemoryPropertyFlags want) {
    VkPhysicalDeviceMemoryProperties mp;
    uint32_t i;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) return i;
    die("no host-visible, coherent memory type");
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    const char *file = argc > 2 ? argv[2] : "iron_exp_f32.spv";
    uint32_t n = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 100003u; /* not a multiple of GROUP: tail */
    char path[1024];
    Artifact a;
    int i, in = -1, out = -1, bad = 0, worst = 0;
    double max_err = 0.0;
    size_t spv_bytes;
    uint32_t *spv;

    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    if (!read_manifest(path, file, &a)) {
        fprintf(stderr, "run_spv: no `artifact %s` in %s\n", file, path);
        return 2;
    }
    if (strcmp(a.backend, "vulkan") != 0) die("the artifact is not a vulkan (.spv) one");
    if (a.nfeatures) die("the kernel needs optional device features; this example enables none");
    for (i = 0; i < a.nargs; i++) {
        Arg *g = &a.args[i];
        if (strcmp(g->kind, "buffer") != 0 || strcmp(g->dtype, "f32") != 0 || g->binding < 0)
            die("this example runs kernels whose arguments are f32 buffers only");
        if (strcmp(g->access, "read") == 0 && in < 0) in = i;
        else if (strcmp(g->access, "write") == 0 && out < 0) out = i;
        else die("expected one read buffer and one write buffer");
    }
    if (in < 0 || out < 0) die("expected one read buffer and one write buffer");
    snprintf(path, sizeof path, "%s/%s", dir, file);
    spv = read_spirv(path, &spv_bytes);
    if (!spv) die("cannot read a SPIR-V module from the artifact file");

    /* instance, device, queue: SPIR-V 1.3 (what Iron emits) needs Vulkan 1.1 */
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "run_spv", 1, NULL, 0, VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkInstance inst;
    ici.pApplicationInfo = &app;
    check(vkCreateInstance(&ici, NULL, &inst), "vkCreateInstance");
    uint32_t npd = 0, nqf = 0, qf = UINT32_MAX;
    vkEnumeratePhysicalDevices(inst, &npd, NULL);
    if (npd == 0) die("no Vulkan device");
    VkPhysicalDevice pds[8];
    if (npd > 8) npd = 8;
    vkEnumeratePhysicalDevices(inst, &npd, pds);
    VkPhysicalDevice pd = pds[0];
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    VkQueueFamilyProperties qfp[16];
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nqf, NULL);
    if (nqf > 16) nqf = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nqf, qfp);
    for (i = 0; i < (int)nqf && qf == UINT32_MAX; i++)
        if (qfp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) qf = (uint32_t)i;
    if (qf == UINT32_MAX) die("no compute queue");
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, qf, 1, &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    VkDevice dev;
    VkQueue queue;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    check(vkCreateDevice(pd, &dci, NULL, &dev), "vkCreateDevice");
    vkGetDeviceQueue(dev, qf, 0, &queue);

    /* one host-visible storage buffer per buffer argument, at the binding the manifest gives */
    VkBuffer bufs[MAX_ARGS];
    VkDeviceMemory mems[MAX_ARGS];
    float *host[MAX_ARGS];
    VkDescriptorSetLayoutBinding lb[MAX_ARGS];
    for (i = 0; i < a.nargs; i++) {
        VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
        VkMemoryRequirements req;
        bci.size = (VkDeviceSize)n * sizeof(float);
        bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
        check(vkCreateBuffer(dev, &bci, NULL, &bufs[i]), "vkCreateBuffer");
        vkGetBufferMemoryRequirements(dev, bufs[i], &req);
        VkMemoryAllocateInfo mai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, req.size,
                                    memory_type(pd, req.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                                            VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)};
        check(vkAllocateMemory(dev, &mai, NULL, &mems[i]), "vkAllocateMemory");
        check(vkBindBufferMemory(dev, bufs[i], mems[i], 0), "vkBindBufferMemory");
        check(vkMapMemory(dev, mems[i], 0, bci.size, 0, (void **)&host[i]), "vkMapMemory");
        lb[i] = (VkDescriptorSetLayoutBinding){(uint32_t)a.args[i].binding, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                               VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    }
    uint32_t seed = 12345u; /* inputs in [-10, 10), from a fixed LCG so every run checks the same data */
    for (uint32_t k = 0; k < n; k++) {
        seed = seed * 1664525u + 1013904223u;
        host[in][k] = (float)((seed >> 8) * (20.0 / 16777216.0) - 10.0);
        host[out][k] = NAN; /* an element the kernel misses stays NaN and fails the check */
    }

    VkDescriptorSetLayoutCreateInfo dslci = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0,
                                             (uint32_t)a.nargs, lb};
    VkDescriptorSetLayout dsl;
    check(vkCreateDescriptorSetLayout(dev, &dslci, NULL, &dsl), "vkCreateDescriptorSetLayout");
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)a.push_size};
    VkPipelineLayoutCreateInfo plci = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &dsl,
                                       a.push_size > 0 ? 1u : 0u, &pcr};
    VkPipelineLayout layout;
    check(vkCreatePipelineLayout(dev, &plci, NULL, &layout), "vkCreatePipelineLayout");
    VkShaderModuleCreateInfo smci = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, spv_bytes, spv};
    VkShaderModule module;
    check(vkCreateShaderModule(dev, &smci, NULL, &module), "vkCreateShaderModule");

    /* the group size is three specialization constants (x, y, z) at the ids the manifest names */
    uint32_t group[3] = {GROUP, 1, 1};
    VkSpecializationMapEntry sme[3];
    for (i = 0; i < 3; i++) sme[i] = (VkSpecializationMapEntry){(uint32_t)a.spec_ids[i], (uint32_t)(4 * i), 4};
    VkSpecializationInfo si = {3, sme, sizeof group, group};
    VkComputePipelineCreateInfo cpci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage = (VkPipelineShaderStageCreateInfo){VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                                                   VK_SHADER_STAGE_COMPUTE_BIT, module, a.entry, &si};
    cpci.layout = layout;
    VkPipeline pipe;
    check(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, NULL, &pipe), "vkCreateComputePipelines");

    VkDescriptorPoolSize dps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, (uint32_t)a.nargs};
    VkDescriptorPoolCreateInfo dpci = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &dps};
    VkDescriptorPool pool;
    check(vkCreateDescriptorPool(dev, &dpci, NULL, &pool), "vkCreateDescriptorPool");
    VkDescriptorSetAllocateInfo dsai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, pool, 1, &dsl};
    VkDescriptorSet set;
    check(vkAllocateDescriptorSets(dev, &dsai, &set), "vkAllocateDescriptorSets");
    for (i = 0; i < a.nargs; i++) {
        VkDescriptorBufferInfo dbi = {bufs[i], 0, VK_WHOLE_SIZE};
        VkWriteDescriptorSet w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, set, (uint32_t)a.args[i].binding, 0,
                                  1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &dbi, NULL};
        vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);
    }

    /* push constants: the exact grid size per axis (the kernel guards threads past it) */
    unsigned char push[256] = {0};
    if (a.push_size > (int)sizeof push) die("push-constant block too large");
    for (i = 0; i < a.npush; i++) {
        int32_t v;
        if (strcmp(a.push[i].name, "iron_n0") == 0) v = (int32_t)n;
        else if (strcmp(a.push[i].name, "iron_n1") == 0 || strcmp(a.push[i].name, "iron_n2") == 0) v = 1;
        else die("the kernel takes scalar arguments; this example passes only the grid size");
        memcpy(push + a.push[i].offset, &v, 4);
    }

    VkCommandPoolCreateInfo cpoolci = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL, 0, qf};
    VkCommandPool cpool;
    check(vkCreateCommandPool(dev, &cpoolci, NULL, &cpool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo cbai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, cpool,
                                        VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    VkCommandBuffer cb;
    check(vkAllocateCommandBuffers(dev, &cbai, &cb), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo cbbi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, NULL,
                                     VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT, NULL};
    check(vkBeginCommandBuffer(cb, &cbbi), "vkBeginCommandBuffer");
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
    if (a.push_size > 0) vkCmdPushConstants(cb, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)a.push_size, push);
    vkCmdDispatch(cb, (n + GROUP - 1) / GROUP, 1, 1);
    /* make the shader's writes visible to the host mapping before we read it */
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                         NULL);
    check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkFence fence;
    check(vkCreateFence(dev, &fci, NULL, &fence), "vkCreateFence");
    VkSubmitInfo sub = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    sub.commandBufferCount = 1;
    sub.pCommandBuffers = &cb;
    check(vkQueueSubmit(queue, 1, &sub, fence), "vkQueueSubmit");
    check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");

    /* Iron's f32 tolerance for one-rounding elementwise kernels: |err| <= 1e-6 + 1e-5 * |exp(x)| */
    for (uint32_t k = 0; k < n; k++) {
        double want = exp((double)host[in][k]), got = host[out][k], err = fabs(got - want);
        if (!(err <= 1e-6 + 1e-5 * fabs(want))) bad++;
        if (err > max_err || isnan(err)) {
            max_err = isnan(err) ? INFINITY : err;
            worst = (int)k;
        }
    }
    printf("run_spv: %s entry %s on %s: %u elements, group %u, %u groups; max abs err %.3g at %d; %d mismatches\n",
           file, a.entry, props.deviceName, n, GROUP, (n + GROUP - 1) / GROUP, max_err, worst, bad);

    vkDestroyFence(dev, fence, NULL);
    vkDestroyCommandPool(dev, cpool, NULL);
    vkDestroyDescriptorPool(dev, pool, NULL);
    vkDestroyPipeline(dev, pipe, NULL);
    vkDestroyShaderModule(dev, module, NULL);
    vkDestroyPipelineLayout(dev, layout, NULL);
    vkDestroyDescriptorSetLayout(dev, dsl, NULL);
    for (i = 0; i < a.nargs; i++) {
        vkUnmapMemory(dev, mems[i]);
        vkDestroyBuffer(dev, bufs[i], NULL);
        vkFreeMemory(dev, mems[i], NULL);
    }
    vkDestroyDevice(dev, NULL);
    vkDestroyInstance(inst, NULL);
    free(spv);
    puts(bad ? "FAIL" : "OK");
    return bad ? 1 : 0;
}
