#include "tools/list_devices_lib.h"

#include "gtest/gtest.h"

namespace strata {
namespace {

std::vector<DeviceRow> TwoRows() {
  DeviceRow cpu{"/job:localhost/replica:0/task:0/device:CPU:0", "CPU", int64_t{16} << 30,
                int64_t{3} << 29, "2 cores"};
  DeviceRow gpu{"/job:localhost/replica:0/task:0/device:GPU:0", "GPU", int64_t{80} << 30, -1,
                "NVIDIA \"H100\", compute 9.0"};
  return {cpu, gpu};
}

TEST(ListDevicesTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(900), "900 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(int64_t{512} << 20), "512.0 MiB");
  EXPECT_EQ(HumanBytes(int64_t{80} << 30), "80.0 GiB");
  EXPECT_EQ(HumanBytes(-1), "-");
}

TEST(ListDevicesTest, TableAlignsColumnsAndEndsWithTheNote) {
  const std::string t = FormatDeviceTable(TwoRows(), "no GPU: because");
  EXPECT_EQ(t,
            "DEVICE                                        TYPE    MEMORY     FREE  DETAILS\n"
            "/job:localhost/replica:0/task:0/device:CPU:0  CPU   16.0 GiB  1.5 GiB  2 cores\n"
            "/job:localhost/replica:0/task:0/device:GPU:0  GPU   80.0 GiB        -  NVIDIA \"H100\", "
            "compute 9.0\n"
            "no GPU: because\n");
}

TEST(ListDevicesTest, JsonEscapesStrings) {
  const std::string j = FormatDeviceJson(TwoRows(), true, "a\nb");
  EXPECT_EQ(j,
            "{\"gpu_support\": true, \"note\": \"a\\nb\", \"devices\": ["
            "{\"name\": \"/job:localhost/replica:0/task:0/device:CPU:0\", \"type\": \"CPU\", "
            "\"memory_bytes\": 17179869184, \"free_bytes\": 1610612736, \"details\": \"2 cores\"}, "
            "{\"name\": \"/job:localhost/replica:0/task:0/device:GPU:0\", \"type\": \"GPU\", "
            "\"memory_bytes\": 85899345920, \"free_bytes\": -1, "
            "\"details\": \"NVIDIA \\\"H100\\\", compute 9.0\"}]}\n");
}

TEST(ListDevicesTest, HostRowDescribesThisMachine) {
  DeviceRow r = HostCpuRow();
  EXPECT_EQ(r.type, "CPU");
  EXPECT_GT(r.memory_bytes, 0);
  EXPECT_LE(r.free_bytes, r.memory_bytes);
  EXPECT_NE(r.details.find("core"), std::string::npos);
}

}  // namespace
}  // namespace strata
